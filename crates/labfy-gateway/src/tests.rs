use crate::*;
use labfy_store::specimen::{self, SpecimenOutcome, SpecimenSpec};
use std::sync::Arc;

#[test]
fn scratch() {
    let dir = tempfile::TempDir::new().unwrap();
    let mut store = labfy_store::Store::open(dir.path()).unwrap();
    let out = specimen::generate(&mut store, SpecimenSpec { seed: 1, size: 200 }, &mut |_, _| {}).unwrap();
    let SpecimenOutcome::Created { workspace, investigation, .. } = out else { panic!() };
    let o = store.reads().overview(workspace.id(), &investigation).unwrap();
    println!("{}", serde_json::to_string_pretty(&o.top_entities).unwrap());
    let s = store.reads().search(workspace.id(), &investigation, "8812 forum echanges", 5).unwrap();
    println!("{}", serde_json::to_string_pretty(&s).unwrap());
    let gw = AgentGateway::new(Arc::new(DirectBackend::new(store))).unwrap();
    for t in gw.catalog().tools() {
        println!("(\"{}\", \"{}\"),", t.id.as_str(), t.fingerprint);
    }
    println!("catalog {}", gw.catalog().fingerprint());
}
