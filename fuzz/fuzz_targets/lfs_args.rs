//! The command lines of lfs and lctl as liblustreapi's parsers take them (one argument per
//! line of the input, the first byte choosing the command): a request or an error with
//! an errno, never a panic.
#![no_main]
use libfuzzer_sys::fuzz_target;
use nacre_lustreapi as lapi;

fuzz_target!(|data: &[u8]| {
    let Some((&which, rest)) = data.split_first() else {
        return;
    };
    let Ok(text) = std::str::from_utf8(rest) else {
        return;
    };
    let args: Vec<&str> = text.split('\n').collect();
    match which % 14 {
        0 => drop(lapi::setstripe::parse_setstripe(&args)),
        1 => drop(lapi::setstripe::parse_migrate(&args)),
        2 => drop(lapi::find::parse_find(&args)),
        3 => drop(lapi::getstripe::parse_getstripe(&args)),
        4 => drop(lapi::df::parse_df(&args)),
        5 => drop(lapi::dirstripe::parse_mkdir(&args)),
        6 => drop(lapi::dirstripe::parse_setdirstripe(&args)),
        7 => drop(lapi::dirstripe::parse_getdirstripe(&args)),
        8 => drop(lapi::lctl::parse_get_param(&args)),
        9 => drop(lapi::lctl::parse_list_param(&args)),
        10 => drop(lapi::lctl::parse_set_param(&args)),
        11 => drop(lapi::lfsck::parse_start(&args)),
        12 => drop(lapi::lfsck::parse_stop(&args)),
        _ => drop(lapi::lfsck::parse_query(&args)),
    }
});
