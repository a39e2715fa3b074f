#![doc = include_str!("../README.md")]
// This crate is where Labfy's system-call `unsafe` lives (STYLE 4): each
// block says why it is sound in a `SAFETY:` comment.
#![allow(unsafe_code)]

mod child;
mod error;
mod jail;
pub mod landlock;
mod raw;
mod root;
pub mod seccomp;
pub mod steps;
mod tmpfs;
pub mod userns;
pub mod worker;

pub use child::{ConfinedChild, pipe};
pub use error::{SpawnError, Step};
pub use jail::{Confinement, Jail, MAX_GROUPS};
pub use root::Root;
pub use tmpfs::Tmpfs;
