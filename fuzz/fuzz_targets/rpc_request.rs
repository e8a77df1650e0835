//! Request bodies as a server decodes them; a decoded request encodes and decodes back to
//! itself, and the server's size checks on it do not panic.
#![no_main]
use libfuzzer_sys::fuzz_target;
use nacre_rpc::msg::{self, Request};

fuzz_target!(|data: &[u8]| {
    if let Ok(req) = msg::decode::<Request>(data) {
        let _ = req.reply_bulk_bytes();
        let _ = req.opcode();
        let _ = req.is_quick();
        let _ = req.cred();
        let _ = req.is_idempotent();
        let enc = msg::encode(&req).expect("re-encode");
        assert_eq!(msg::decode::<Request>(&enc).ok(), Some(req));
    }
});
