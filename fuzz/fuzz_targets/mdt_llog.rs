//! The unlink llog's records (an owner FID and the objects to destroy): decoded records
//! encode and decode back to themselves.
#![no_main]
use libfuzzer_sys::fuzz_target;
use nacre_mdt::mdd::decode_llog;

fuzz_target!(|data: &[u8]| {
    if let Some((owner, objs)) = decode_llog(data) {
        let enc = postcard::to_allocvec(&(&owner, &objs)).expect("re-encode");
        assert_eq!(decode_llog(&enc), Some((owner, objs)));
    }
});
