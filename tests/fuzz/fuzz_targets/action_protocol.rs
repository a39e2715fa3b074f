//! The strict action-protocol parser (SPEC M2, M5): whatever a model writes,
//! `parse_action` never panics; a refusal names its reason; an accepted
//! action, printed as the runtime replays it, parses to the same action.
#![no_main]

use std::sync::OnceLock;

use labfy_gateway::Catalog;
use labfy_runtime::protocol::{parse_action, repair_message};
use libfuzzer_sys::fuzz_target;

static CATALOG: OnceLock<Catalog> = OnceLock::new();

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else { return };
    let catalog = CATALOG.get_or_init(|| Catalog::build().expect("the static catalog compiles"));
    match parse_action(text, catalog) {
        Ok(action) => {
            let printed = action.to_text();
            let again = parse_action(&printed, catalog).expect("a printed action parses again");
            assert_eq!(again.to_value(), action.to_value(), "parse ∘ print changed the action: {printed}");
        }
        Err(e) => {
            assert!(!e.to_string().is_empty(), "a refusal without a reason");
            assert!(!repair_message(&e).is_empty(), "a repair message without text");
        }
    }
});
