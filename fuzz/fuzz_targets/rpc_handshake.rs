//! The server's side of the handshake, fed what a peer sends. The first byte picks how the
//! rest is sent: raw (header checks, limits, checksum), or as the body of a well-formed
//! handshake frame (the client hello's decoding and checks). Either way the server answers
//! or refuses, and never hangs: the peer's side is closed after the input.
#![no_main]
use libfuzzer_sys::fuzz_target;
use nacre_rpc::frame::{FLAG_HANDSHAKE, make_header};
use nacre_rpc::server::{ServerConfig, handshake};
use nacre_rpc::{Key, memory::MemoryBudget};
use std::sync::{Arc, OnceLock};
use tokio::io::AsyncWriteExt;

fn config() -> &'static ServerConfig {
    static CFG: OnceLock<ServerConfig> = OnceLock::new();
    CFG.get_or_init(|| ServerConfig {
        fsname: "testfs".to_string(),
        target: "testfs-MDT0000".to_string(),
        key: Key::from_bytes([7; 32]),
        memory: MemoryBudget::new(1 << 30),
        stats: Arc::new(Default::default()),
        net: Arc::new(Default::default()),
        service_at: Default::default(),
    })
}

fn runtime() -> &'static tokio::runtime::Runtime {
    static RT: OnceLock<tokio::runtime::Runtime> = OnceLock::new();
    RT.get_or_init(|| {
        tokio::runtime::Builder::new_current_thread()
            .build()
            .expect("a current-thread runtime")
    })
}

fuzz_target!(|data: &[u8]| {
    let Some((&how, rest)) = data.split_first() else {
        return;
    };
    let sent = if how & 1 == 0 {
        let h = make_header(0, 0, FLAG_HANDSHAKE, rest, &[]);
        let mut v = h.encode().to_vec();
        v.extend_from_slice(rest);
        v
    } else {
        rest.to_vec()
    };
    runtime().block_on(async {
        // Room for the whole input and the server's two frames, so no write waits.
        let (mut client, mut server) = tokio::io::duplex(sent.len() + 64 * 1024);
        client.write_all(&sent).await.expect("fits the pipe");
        client.shutdown().await.expect("shutdown");
        let r = handshake(&mut server, config()).await;
        // Nobody else holds the key, and the server nonce is random.
        assert!(r.is_err(), "accepted a peer without the key: {r:?}");
    });
});
