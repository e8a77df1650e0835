//! Frames as they come off the wire: header checks, limits, checksum; a frame that decodes
//! encodes back to the same bytes.
#![no_main]
use libfuzzer_sys::fuzz_target;
use nacre_rpc::frame::{HEADER_LEN, MAX_BODY, MAX_BULK, decode_slice, make_timed_header};

fuzz_target!(|data: &[u8]| {
    if let Ok(Some((f, used))) = decode_slice(data) {
        assert!(used <= data.len());
        assert!(f.header.body_len <= MAX_BODY && f.header.bulk_len <= MAX_BULK);
        let h = make_timed_header(
            f.header.opcode,
            f.header.xid,
            f.header.flags,
            (f.header.timeout, f.header.service_time),
            &f.body,
            &f.bulk,
        );
        assert_eq!(h, f.header);
        let mut again = h.encode().to_vec();
        again.extend_from_slice(&f.body);
        again.extend_from_slice(&f.bulk);
        assert_eq!(&again[..], &data[..used]);
        assert_eq!(used, HEADER_LEN + f.body.len() + f.bulk.len());
    }
});
