//! Routers: one function per area, each returning `Router<AppState>` (STYLE 7).

pub mod agent;
pub mod api;
pub mod cases;
pub mod egress;
pub mod export;
pub mod import;
pub mod resources;
pub mod runtime;
pub mod tools;
pub mod ui;

/// The API's OpenAPI document (`crate::openapi`): every module's part.
pub fn openapi() -> utoipa::openapi::OpenApi {
    use utoipa::OpenApi as _;
    crate::openapi::document([
        api::Doc::openapi(),
        agent::Doc::openapi(),
        runtime::Doc::openapi(),
        resources::Doc::openapi(),
        egress::Doc::openapi(),
        import::Doc::openapi(),
        cases::Doc::openapi(),
        export::Doc::openapi(),
        tools::Doc::openapi(),
    ])
}
