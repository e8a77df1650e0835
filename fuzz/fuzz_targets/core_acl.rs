//! POSIX ACL xattrs as a client sets them: checked as the kernel checks them, and an ACL
//! that passes encodes back to the same bytes.
#![no_main]
use libfuzzer_sys::fuzz_target;
use nacre_core::acl::Acl;

fuzz_target!(|data: &[u8]| {
    if let Ok(acl) = Acl::decode(data) {
        assert_eq!(acl.encode(), data);
    }
});
