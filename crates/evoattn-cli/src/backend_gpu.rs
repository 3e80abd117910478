//! backend_gpu
