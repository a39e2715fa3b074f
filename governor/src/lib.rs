#![doc = include_str!("../README.md")]

pub mod cgroup;
pub mod config;
pub mod gguf;
pub mod ledger;
pub mod model;
pub mod probe;
pub mod sandbox;
pub mod service;
