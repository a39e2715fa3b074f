//! Routers: one function per area, each returning `Router<AppState>` (STYLE 7).

pub mod agent;
pub mod api;
pub mod cases;
pub mod egress;
pub mod export;
pub mod import;
pub mod resources;
pub mod runtime;
pub mod ui;
