//! The safe entry point.
