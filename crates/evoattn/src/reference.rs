//! The float64 CPU reference.
