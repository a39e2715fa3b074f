#![doc = include_str!("../README.md")]

pub mod backend;
pub mod canonical;
pub mod capability;
pub mod catalog;
mod demo_capability;
mod driver;
mod error;
pub mod fetch;
mod gateway;
pub mod journal;
pub mod protocol;
pub mod provision;
pub mod sandbox;
mod services;
mod turns;

pub use backend::{Backend, DirectBackend};
pub use catalog::{Availability, Catalog, Environment, Readiness, Tool, ToolId};
pub use driver::{DEMO_ACTOR, DEMO_AGENT_LABEL, LOCAL_MODEL_ACTOR};
pub use error::GatewayError;
pub use fetch::{AgentFetch, Fetched, Fetcher};
pub use gateway::{AgentGateway, INTERRUPTED_BY_RESTART, Restored};
pub use protocol::waits_on_human;
pub use sandbox::{Sandbox, SandboxAsk, SandboxOutcome};
pub use services::Scope;
pub use turns::keywords;

#[cfg(test)]
mod tests;
