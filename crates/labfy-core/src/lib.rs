#![doc = include_str!("../README.md")]

pub mod bounded;
pub mod crash;
pub mod durable;
mod error;
pub mod json;
pub mod leak;
mod object_ref;
pub mod one_line;
pub mod process;
mod risk;
pub mod throttle;

pub use error::ErrorKind;
pub use object_ref::{CampaignRef, GrantRef, JobRef, ObjectRef, RefError, RefKind};
pub use risk::RiskLevel;
