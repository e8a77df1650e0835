//! fio job files as `nacre bench mix` reads them: jobs or an error, never a panic.
#![no_main]
use libfuzzer_sys::fuzz_target;
use nacre_bench::mix::parse_job_file;

fuzz_target!(|data: &[u8]| {
    if let Ok(text) = std::str::from_utf8(data) {
        let _ = parse_job_file(text, "fuzz");
    }
});
