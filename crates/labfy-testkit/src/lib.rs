//! Labfy's shared test support (a dev-dependency only). See the README.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::missing_panics_doc)]

pub mod flood;
pub mod model;
