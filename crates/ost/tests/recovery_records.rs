//! A restarted OST in recovery keeps the records of the clients it waits for until its
//! recovery ends: a commit asked for meanwhile waits, and its own periodic commit does not
//! run, so a second crash during recovery still finds whom to wait for.

use bytes::Bytes;
use nacre_osd::{ObjStore, ObjStoreConfig};
use nacre_ost::Ost;
use nacre_ost::recovery::Transactions;
use nacre_rpc::auth::PeerRole;
use nacre_rpc::msg::Request;
use nacre_rpc::server::{RequestCtx, Service};
use std::sync::Arc;
use std::time::Duration;

fn open(dir: &std::path::Path) -> Arc<Ost> {
    let health = nacre_osd::Health::open("rr-OST0000", dir).expect("health");
    let store = ObjStore::open(dir, ObjStoreConfig::default(), health).expect("store");
    Arc::new(Ost::new(0, store).expect("ost"))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn records_outlive_commits_asked_for_during_recovery() {
    let dir = tempfile::tempdir().expect("tmp");
    // A client with a change answered and not committed, then a crash (no stop).
    {
        let (t, _) = Transactions::load(dir.path()).expect("load");
        assert!(t.start(7));
        t.record(7).expect("record");
        assert_eq!(t.done(7, true), 1);
    }
    let ost = open(dir.path());
    assert!(
        ost.params()
            .iter()
            .any(|p| p.name == "recovery_status" && p.value.starts_with("status: RECOVERING"))
    );
    let (stop, rx) = tokio::sync::watch::channel(false);
    tokio::spawn(ost.clone().housekeeping(rx));
    let ctx = RequestCtx {
        peer: "127.0.0.1:1".parse().expect("addr"),
        client: "other".into(),
        role: PeerRole::Client,
        conn_id: 1,
    };
    let commit = ost.clone().handle(ctx, Request::OstCommit, Bytes::new());
    // Past the OST's own commit interval (5 s): neither commit may drop the record.
    assert!(
        tokio::time::timeout(Duration::from_secs(7), commit)
            .await
            .is_err(),
        "a commit was answered during recovery"
    );
    let (_, recorded) = Transactions::load(dir.path()).expect("reload");
    assert_eq!(
        recorded,
        [7].into_iter().collect(),
        "the record of a client recovery waits for was dropped"
    );
    let _ = stop.send(true);
}
