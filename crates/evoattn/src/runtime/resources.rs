//! resources
