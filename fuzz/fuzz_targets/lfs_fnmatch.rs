//! `lfs find -name` patterns (fnmatch): the input is a pattern, a NUL, then a name; a
//! match answers in bounded time and a pattern without wildcards matches only itself.
#![no_main]
use libfuzzer_sys::fuzz_target;
use nacre_lustreapi::fnmatch::Wildcard;

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    let (pattern, name) = text.split_once('\0').unwrap_or((text, ""));
    let w = Wildcard::new(pattern);
    let m = w.matches(name);
    let _ = w.matches_bytes(name.as_bytes(), true);
    if !w.has_wildcards() && !pattern.contains('\\') {
        assert_eq!(m, pattern == name, "{pattern:?} against {name:?}");
    }
});
