//! The IPC frame reader and the request decoders of the daemons (SPEC P3,
//! T2): the governor and egress read what a possibly compromised server
//! writes. Reading never panics; a decoded request, written back, reads as
//! the same request.
#![no_main]

use std::time::Duration;

use labfy_ipc::frame::{read_frame, write_frame};
use labfy_ipc::messages::control::ControlRequest;
use labfy_ipc::messages::egress::EgressRequest;
use labfy_ipc::messages::governor::GovernorRequest;
use libfuzzer_sys::fuzz_target;
use serde::Serialize;
use serde::de::DeserializeOwned;

const WAIT: Duration = Duration::from_secs(1);

async fn round_trip<T: Serialize + DeserializeOwned>(data: &[u8]) {
    let mut input = data;
    match read_frame::<_, T>(&mut input, WAIT).await {
        Ok(Some(request)) => {
            let mut out = Vec::new();
            write_frame(&mut out, &request, WAIT).await.expect("a decoded request encodes");
            let again: T = read_frame(&mut out.as_slice(), WAIT).await.expect("reads back").expect("one frame");
            assert_eq!(
                serde_json::to_value(&again).expect("serialises"),
                serde_json::to_value(&request).expect("serialises"),
                "decode ∘ encode changed the request"
            );
        }
        Ok(None) => {}
        Err(e) => assert!(!e.to_string().is_empty(), "a refusal without a reason"),
    }
}

fuzz_target!(|data: &[u8]| {
    let Some((which, frame)) = data.split_first() else { return };
    let rt = tokio::runtime::Builder::new_current_thread().enable_time().build().expect("a runtime");
    rt.block_on(async {
        match which % 3 {
            0 => round_trip::<ControlRequest>(frame).await,
            1 => round_trip::<GovernorRequest>(frame).await,
            _ => round_trip::<EgressRequest>(frame).await,
        }
    });
});
