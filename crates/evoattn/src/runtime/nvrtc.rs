//! nvrtc
