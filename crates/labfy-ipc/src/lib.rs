#![doc = include_str!("../README.md")]

pub mod auth;
pub mod client;
pub mod daemon;
mod error;
pub mod frame;
pub mod login;
pub mod messages;
pub mod secret;
pub mod server;

pub use error::IpcError;
pub use frame::MAX_FRAME_BYTES;
pub use messages::{Boundary, PROTOCOL_VERSION};
