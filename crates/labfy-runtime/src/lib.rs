#![doc = include_str!("../README.md")]

pub mod client;
pub mod protocol;
pub mod runtime;
