//! An OST object's checksum-table xattr: a table that parses has the header's fields and
//! the inline entries exactly as stored.
#![no_main]
use libfuzzer_sys::fuzz_target;
use nacre_osd::cksum::{Table, parse};

fuzz_target!(|data: &[u8]| {
    if let Ok(t) = parse(data) {
        match t {
            Table::Inline(entries) => {
                let stored: Vec<u8> = entries.iter().flat_map(|e| e.to_le_bytes()).collect();
                assert_eq!(&data[8..], &stored[..]);
            }
            Table::Sidecar => assert_eq!(data.len(), 8),
            Table::Missing => panic!("parse never says missing"),
        }
    }
});
