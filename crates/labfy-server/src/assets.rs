//! The UI's static files, embedded in the binary: the page, its style, its
//! ES modules and the vendored graph library — the same for every Labfy of
//! this version, carrying no secret, so served without a session
//! ([`is_asset`], used by `security`); `routes::ui` serves them.

/// The application's page (`{{SESSION}}` replaced by `routes::ui`).
pub const INDEX_HTML: &str = include_str!("../assets/index.html");
/// Its style sheet.
pub const APP_CSS: &str = include_str!("../assets/app.css");
/// The UI's ES modules (SPEC U9), by path: `app.js` (the chrome, the search
/// box and the start) imports the others — the words (`i18n.js`), the DOM
/// helpers, the API client, the page's frame and router (`page.js`), one
/// module per view, the resources and agent panels, the egress badge and
/// the graph.
pub const MODULES: [(&str, &str); 20] = [
    ("/static/app.js", include_str!("../assets/app.js")),
    ("/static/i18n.js", include_str!("../assets/i18n.js")),
    ("/static/dom.js", include_str!("../assets/dom.js")),
    ("/static/api.js", include_str!("../assets/api.js")),
    ("/static/resources.js", include_str!("../assets/resources.js")),
    ("/static/agent.js", include_str!("../assets/agent.js")),
    ("/static/toolreview.js", include_str!("../assets/toolreview.js")),
    ("/static/observations.js", include_str!("../assets/observations.js")),
    ("/static/egress.js", include_str!("../assets/egress.js")),
    ("/static/page.js", include_str!("../assets/page.js")),
    ("/static/lists.js", include_str!("../assets/lists.js")),
    ("/static/cases.js", include_str!("../assets/cases.js")),
    ("/static/overview.js", include_str!("../assets/overview.js")),
    ("/static/forms.js", include_str!("../assets/forms.js")),
    ("/static/picker.js", include_str!("../assets/picker.js")),
    ("/static/timeline.js", include_str!("../assets/timeline.js")),
    ("/static/reader.js", include_str!("../assets/reader.js")),
    ("/static/node.js", include_str!("../assets/node.js")),
    ("/static/provenance.js", include_str!("../assets/provenance.js")),
    ("/static/graph.js", include_str!("../assets/graph.js")),
];
/// Cytoscape.js, vendored unmodified (`assets/vendor/cytoscape/VENDOR.md`).
pub const CYTOSCAPE_JS: &str = include_str!("../assets/vendor/cytoscape/cytoscape.esm.min.mjs");
/// Where the UI loads it from: the version is in the path, so the file is
/// cached for good.
pub const CYTOSCAPE_PATH: &str = "/static/vendor/cytoscape-3.35.0.esm.min.mjs";

/// Whether `path` is exactly one of the UI's static files (its style, its
/// modules, the vendored graph library): served without a session.
pub fn is_asset(path: &str) -> bool {
    path == APP_CSS_PATH || path == CYTOSCAPE_PATH || MODULES.iter().any(|(p, _)| *p == path)
}

/// Where the UI's style sheet is served.
pub const APP_CSS_PATH: &str = "/static/app.css";
