//! `lfs setstripe --yaml` templates: a layout or an error, never a panic; a layout it
//! returns passes the structural checks or is refused by them with an error.
#![no_main]
use libfuzzer_sys::fuzz_target;
use nacre_core::layout_rules::check_structure;
use nacre_lustreapi::setstripe::parse_layout_yaml;

fuzz_target!(|data: &[u8]| {
    if let Ok(text) = std::str::from_utf8(data)
        && let Ok(layout) = parse_layout_yaml(text)
    {
        let _ = check_structure(&layout);
    }
});
