//! backend_mock
