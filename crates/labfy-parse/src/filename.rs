//! What a file's name says: its extension, and whether it names an office
//! document (a zip that is a document, not an archive to open).

/// Extensions of the office documents read as such (`office.rs`).
pub(crate) const OFFICE: &[&str] = &["docx", "xlsx", "pptx", "odt", "ods", "odp"];

/// Lower-case extension of `name`, without the dot.
pub(crate) fn extension(name: &str) -> String {
    let base = name.rsplit(['/', '\\']).next().unwrap_or(name);
    match base.rsplit_once('.') {
        Some((stem, ext)) if !stem.is_empty() => ext.to_ascii_lowercase(),
        _ => String::new(),
    }
}

/// Whether `name` is an office document's.
pub(crate) fn is_office_name(name: &str) -> bool {
    OFFICE.contains(&extension(name).as_str())
}
