//! Reply bodies as a client decodes them; a decoded reply encodes and decodes back to itself.
#![no_main]
use libfuzzer_sys::fuzz_target;
use nacre_rpc::msg::{self, Reply};

fuzz_target!(|data: &[u8]| {
    if let Ok(rep) = msg::decode::<Reply>(data) {
        let enc = msg::encode(&rep).expect("re-encode");
        assert_eq!(msg::decode::<Reply>(&enc).ok(), Some(rep));
    }
});
