#![doc = include_str!("../README.md")]

pub mod bounded;
mod error;
mod object_ref;

pub use error::ErrorKind;
pub use object_ref::{ObjectRef, RefError, RefKind};
