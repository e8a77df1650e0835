//! Every request and reply exchanged between clients and targets.
//!
//! One enum per direction, so a connection needs no per-service codec and a handler matches
//! exhaustively. Bulk data (file contents) never goes in these bodies: it rides after the
//! body in the frame (see [`crate::frame`]).

use nacre_core::attr::SetAttr;
use nacre_core::lmv::{Lmv, LmvTemplate};
use nacre_core::{Attr, Component, Errno, Fid, FileKind, Layout, OstLayout, TargetName, Timespec};
use serde::{Deserialize, Serialize};

/// Checksums of a bulk's pieces ([`nacre_core::cksum`]): each crc32c covers the bytes of
/// one 4 KiB block of the object the bulk was cut from, so the receiver can name the block
/// that arrived damaged, and the OST stores a whole block's checksum as it came.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct BulkCksum {
    pub kind: nacre_core::cksum::ChecksumType,
    pub sums: Vec<u32>,
}

/// A write's grant (Lustre's `OBD_BRW_FROM_GRANT` and `o_undirty`): whether the client
/// cached these bytes against space the OST granted it, and how much grant it would like
/// to hold in all. The reply ([`Reply::OstWritten`]) carries the grant added.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct WriteGrant {
    /// The bytes were acknowledged from the client's cache against its grant: the OST
    /// takes them from the grant it holds for this client (they are reserved already).
    pub from_grant: bool,
    /// The grant this client would like to hold at this OST (0: asks for none).
    pub want: u64,
}

/// Who is asking: the caller's identity, for ownership of new files and the MDT's
/// permission checks (Lustre's `mdt_body` fsuid, fsgid, suppgids and `cr_cap`). The MDT
/// trusts it as Lustre's does a client's, except that it squashes root (`root_squash`).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Cred {
    /// File-system user id (`fsuid`).
    pub uid: u32,
    /// File-system group id (`fsgid`).
    pub gid: u32,
    /// Supplementary groups, at most [`MAX_GROUPS`].
    pub groups: Vec<u32>,
    /// Effective capabilities: bit N is Linux capability N (see [`cap`]).
    pub cap: u64,
    /// The creator's umask: applied to a new entry's mode unless its directory has a
    /// default ACL, which replaces it (POSIX.1e). 0 for callers that pass final modes.
    pub umask: u32,
}

/// Supplementary groups a [`Cred`] may carry (Linux's `NGROUPS_MAX`).
pub const MAX_GROUPS: usize = 65536;
/// How long an MDT holds a [`Request::WaitCallbacks`] poll with nothing to return. A
/// client waits for the answer at least this plus its round trip, whatever its recovery
/// timeout, so an idle poll is answered, not timed out.
pub const WAIT_CALLBACKS_HOLD: std::time::Duration = std::time::Duration::from_secs(10);

/// Linux capability numbers the MDT honours (`linux/capability.h`).
pub mod cap {
    pub const CHOWN: u32 = 0;
    pub const DAC_OVERRIDE: u32 = 1;
    pub const DAC_READ_SEARCH: u32 = 2;
    pub const FOWNER: u32 = 3;
    pub const FSETID: u32 = 4;
    pub const SYS_ADMIN: u32 = 21;
    pub const MKNOD: u32 = 27;
    /// Every capability (`CAP_LAST_CAP` is 40): what root holds.
    pub const ALL: u64 = (1 << 41) - 1;
}

impl Cred {
    /// uid 0 with every capability.
    pub fn root() -> Cred {
        Cred::user(0, 0, Vec::new(), cap::ALL)
    }

    pub fn user(uid: u32, gid: u32, groups: Vec<u32>, caps: u64) -> Cred {
        Cred {
            uid,
            gid,
            groups,
            cap: caps,
            umask: 0,
        }
    }

    pub fn in_group(&self, gid: u32) -> bool {
        self.gid == gid || self.groups.contains(&gid)
    }

    pub fn capable(&self, c: u32) -> bool {
        c < 64 && self.cap & (1 << c) != 0
    }
}

/// A target's address as the MGS records it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct TargetInfo {
    pub name: TargetName,
    /// `host:port`.
    pub addr: String,
    /// Registered and not marked down.
    pub active: bool,
}

/// What a client needs to mount: the file system's targets and persistent parameters.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct FsConfig {
    pub fsname: String,
    pub mdts: Vec<TargetInfo>,
    pub osts: Vec<TargetInfo>,
    /// `set_param -P` settings, in the order they were made.
    pub params: Vec<(String, String)>,
    /// OST pools, by name (`lctl pool_new`); absent from configurations written before
    /// pools existed.
    #[serde(default)]
    pub pools: Vec<nacre_core::pool::OstPool>,
    /// Bumped on every change, so clients can tell they are current.
    pub generation: u64,
}

/// Space and inode counts of one target (`statfs`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct StatFs {
    /// Bytes per block for the counts below.
    pub bsize: u32,
    pub blocks: u64,
    pub bfree: u64,
    pub bavail: u64,
    pub files: u64,
    pub ffree: u64,
    pub namelen: u32,
}

/// One directory entry.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Dirent {
    pub name: Vec<u8>,
    pub fid: Fid,
    pub kind: FileKind,
    /// Where to resume after this entry (stable across concurrent changes).
    pub cookie: u64,
}

/// An inode as the MDT reports it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct InodeInfo {
    pub attr: Attr,
    pub layout: Option<Layout>,
    pub lmv: Option<Lmv>,
    /// The MDT's size is exact: no client holds the file open for writing and the last
    /// writer reported its size at close. Otherwise the client asks the OSTs (glimpse).
    pub size_authoritative: bool,
}

/// What an OST knows of one object (Lustre's glimpse answer).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ObjAttr {
    pub size: u64,
    /// 512-byte blocks allocated.
    pub blocks: u64,
    /// Last data change.
    pub mtime: nacre_core::Timespec,
}

/// `open(2)` flags the MDT cares about.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct OpenFlags {
    pub write: bool,
    pub read: bool,
    pub truncate: bool,
    pub append: bool,
}

/// The layout the client asks for when creating a file or setting a default.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum LayoutRequest {
    /// Inherit from the parent directory or the file system default.
    Inherit,
    /// Use this layout template.
    Explicit(Layout),
}

/// Requests. Opcode numbers are the variant order and appear in logs and traces only.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum Request {
    Ping,

    // --- MGS ---
    /// A target announces where it serves.
    MgsRegister {
        target: TargetName,
        addr: String,
    },
    /// The configuration; with `newer_than`, waits (up to the MGS's poll time) until the
    /// generation passes it, so clients and servers learn of changes at once.
    MgsGetConfig {
        newer_than: Option<u64>,
    },
    /// `lctl set_param -P NAME=VALUE` (or `-d` to delete).
    MgsSetParam {
        name: String,
        value: Option<String>,
    },

    // --- MDT: namespace ---
    Statfs,
    Lookup {
        parent: Fid,
        name: Vec<u8>,
        cred: Cred,
    },
    Getattr {
        fid: Fid,
    },
    Setattr {
        fid: Fid,
        attr: SetAttr,
        cred: Cred,
        /// A size change through this open handle (`ftruncate`, `O_TRUNC`): a handle
        /// open for writing needs no write permission now (POSIX).
        handle: Option<u64>,
    },
    Create {
        parent: Fid,
        name: Vec<u8>,
        mode: u32,
        rdev: u32,
        cred: Cred,
        /// Target of a symlink.
        symlink: Option<Vec<u8>>,
        layout: LayoutRequest,
        /// Also open the new file (FUSE `create`).
        open: Option<OpenFlags>,
        /// `O_EXCL`: fail with EEXIST rather than open an existing file.
        exclusive: bool,
    },
    Open {
        fid: Fid,
        flags: OpenFlags,
        cred: Cred,
    },
    /// Close an open handle, saying whether it wrote (the MDT then settles the size from
    /// the objects once the last writer is gone).
    Close {
        handle: u64,
        wrote: bool,
    },
    Unlink {
        parent: Fid,
        name: Vec<u8>,
        dir: bool,
        cred: Cred,
    },
    Rename {
        src_parent: Fid,
        src_name: Vec<u8>,
        dst_parent: Fid,
        dst_name: Vec<u8>,
        /// `RENAME_NOREPLACE` (1) / `RENAME_EXCHANGE` (2).
        flags: u32,
        cred: Cred,
    },
    Link {
        fid: Fid,
        parent: Fid,
        name: Vec<u8>,
        cred: Cred,
    },
    Readdir {
        fid: Fid,
        cookie: u64,
        max: u32,
        cred: Cred,
    },
    Readlink {
        fid: Fid,
    },
    GetXattr {
        fid: Fid,
        name: Vec<u8>,
        cred: Cred,
    },
    ListXattr {
        fid: Fid,
        cred: Cred,
    },
    SetXattr {
        fid: Fid,
        name: Vec<u8>,
        value: Vec<u8>,
        flags: i32,
        cred: Cred,
    },
    RemoveXattr {
        fid: Fid,
        name: Vec<u8>,
        cred: Cred,
    },
    /// Set a file's layout (empty files only) or a directory's default (`None` deletes it).
    SetLayout {
        fid: Fid,
        layout: Option<Layout>,
        cred: Cred,
    },
    /// A directory's default layout.
    GetDefaultLayout {
        fid: Fid,
    },
    /// Make sure every component of `fid` below `end` has objects (a write reaches them).
    LayoutIntent {
        fid: Fid,
        end: u64,
    },
    /// The path of `fid` relative to the root, from its link back-pointers.
    Fid2Path {
        fid: Fid,
    },
    SetDefaultLmv {
        fid: Fid,
        lmv: Option<LmvTemplate>,
        cred: Cred,
    },

    // --- OST: objects ---
    /// Write the bulk at `offset` of object `obj`; `parent` is the file FID with the stripe
    /// index in `ver` (the object's filter fid, set on first write). With `cksum`, the OST
    /// checks the bulk before writing it: a damaged one is refused with EBADMSG, and the
    /// client sends it again. `layout` is the shape of the component the object is a
    /// stripe of, kept beside the filter fid (Lustre's `ff_layout`); the OST refuses one
    /// that has no stripe `parent.ver` with EINVAL.
    OstWrite {
        obj: Fid,
        parent: Fid,
        offset: u64,
        cksum: Option<BulkCksum>,
        grant: WriteGrant,
        layout: Option<OstLayout>,
    },
    /// Read; with `cksum`, the reply is [`Reply::Checksummed`] with the bulk's checksums.
    /// Data that fails its stored checksum on the OST is ECKSUM (EBADE).
    OstRead {
        obj: Fid,
        offset: u64,
        len: u32,
        cksum: Option<nacre_core::cksum::ChecksumType>,
        /// A block the OST's last crash may have torn: taken as kept, or reported bad to
        /// a reader that has another copy to repair it from.
        torn: nacre_core::cksum::TornBlocks,
        /// With `cksum`: whether the OST or the reader checks whole blocks against their
        /// stored checksums (without `cksum` the OST checks every block).
        verify: nacre_core::cksum::ReadVerify,
    },
    /// Sizes and blocks of objects (Lustre's glimpse).
    OstGetattr {
        objs: Vec<Fid>,
    },
    /// Truncate an object to `size`.
    OstPunch {
        obj: Fid,
        size: u64,
    },
    OstDestroy {
        objs: Vec<Fid>,
    },
    OstSync {
        objs: Vec<Fid>,
    },
    OstStatfs,
    /// Create objects in `seq` up to and including `last`; replies with the new last id.
    OstPrecreate {
        seq: u64,
        last: u32,
    },
    /// The highest object id created in `seq`.
    OstGetLastId {
        seq: u64,
    },
    /// `fallocate(2)` on `[offset, offset + len)` of object `obj` with the file's `mode`
    /// (allocate, keep size, punch hole, zero range); `parent` as for [`Request::OstWrite`].
    /// Appended last: postcard numbers variants by position.
    OstFallocate {
        obj: Fid,
        parent: Fid,
        offset: u64,
        len: u64,
        mode: i32,
    },

    // --- MDT: Data-on-MDT and layout changes ---
    /// Write the bulk at `offset` of file `fid`'s Data-on-MDT component (`cksum` as for
    /// [`Request::OstWrite`]).
    DomWrite {
        fid: Fid,
        offset: u64,
        cksum: Option<BulkCksum>,
    },
    /// Read from file `fid`'s Data-on-MDT component (short at its end; `cksum` as for
    /// [`Request::OstRead`]).
    DomRead {
        fid: Fid,
        offset: u64,
        len: u32,
        cksum: Option<nacre_core::cksum::ChecksumType>,
    },
    DomSync {
        fid: Fid,
    },
    DomFallocate {
        fid: Fid,
        offset: u64,
        len: u64,
        mode: i32,
    },
    /// `lfs setstripe --component-add`: append components (already placed after the last).
    AddComponents {
        fid: Fid,
        components: Vec<Component>,
        cred: Cred,
    },
    /// `lfs setstripe --component-del`: by id, or every component with `flags` set
    /// (`neg`: clear) — only `^init` (uninstantiated components) is accepted by flags.
    DelComponents {
        fid: Fid,
        id: Option<u32>,
        flags: u32,
        neg: u32,
        cred: Cred,
    },
    /// An unnamed file on `fid`'s MDT with `layout`, opened for writing (the copy target of
    /// `lfs migrate`); it disappears at close unless swapped in.
    CreateVolatile {
        fid: Fid,
        layout: Layout,
        cred: Cred,
    },
    /// Gives `fid` the layout (and data) of `volatile`, if `fid`'s layout generation is still
    /// `layout_gen`; the old layout goes with the volatile file.
    SwapLayouts {
        fid: Fid,
        volatile: Fid,
        layout_gen: u32,
        cred: Cred,
    },
    // --- DNE (appended: postcard numbers variants by position) ---
    /// `lfs mkdir -i/-c/-H`: a directory with an explicit stripe layout (remote when its
    /// MDT is not the parent's, striped when it has more than one stripe).
    Mkdir {
        parent: Fid,
        name: Vec<u8>,
        mode: u32,
        cred: Cred,
        layout: DirLayoutRequest,
    },
    /// A directory's default directory layout (`lfs getdirstripe -D`).
    GetDefaultLmv {
        fid: Fid,
    },
    /// MDT to MDT: run the updates of distributed operation `op` (coordinated by MDT
    /// `coord`) that are reversible now, and remember how to finish or undo them.
    DnePrepare {
        coord: u32,
        op: u64,
        updates: Vec<DneUpdate>,
    },
    /// MDT to MDT: operation `op` committed on its coordinator; finish it.
    DneCommit {
        coord: u32,
        op: u64,
    },
    /// MDT to MDT: operation `op` will not commit; undo what was prepared.
    DneAbort {
        coord: u32,
        op: u64,
    },
    /// MDT to MDT: whether operation `op` of the receiving coordinator committed.
    DneResolve {
        op: u64,
    },
    /// MDT to MDT: a metadata sequence of the receiving MDT for MDT `to` to allocate
    /// FIDs of new remote objects from (Lustre's sequence grant to an OSP).
    DneSeqGrant {
        to: u32,
    },
    /// MDT to MDT: the name entry (FID and type) of `name` in directory `parent`,
    /// without the child's attributes.
    DneLookup {
        parent: Fid,
        name: Vec<u8>,
    },
    /// MDT to MDT: an inode's first link (parent FID and name; none for the root) and,
    /// for a directory stripe, its master directory.
    DneLinks {
        fid: Fid,
    },
    /// How many distributed operations this MDT has not finished (recovery status).
    DneStatus,
    /// MDT to MDT0: take (or give back) the file system's rename lock, held by MDT
    /// `holder` under `token`; a holder that never gives it back loses it after a lease.
    DneRenameLock {
        holder: u32,
        token: u64,
        acquire: bool,
    },

    // --- OST: extent maps (appended) ---
    /// Where object `obj`'s bytes lie on the OST's device (`nacre frag`).
    OstFiemap {
        obj: Fid,
    },

    // --- Cache coherence and durability (appended) ---
    /// Client to MDT: a long poll for the files this connection holds open that another
    /// client changed (Lustre's blocking ASTs); `acked` is the last callback sequence
    /// this client has handled. Held at most [`WAIT_CALLBACKS_HOLD`]. See
    /// `nacre_mdt::callback`.
    WaitCallbacks {
        acked: u64,
    },
    /// Client to MDT: `fsync`, `fsyncdir`, `syncfs`: everything the MDT acknowledged is on
    /// stable storage when the reply comes. With `changed`, this client changed `fid`'s
    /// data, and other clients drop what they cached of it first.
    Sync {
        fid: Option<Fid>,
        changed: bool,
    },

    // --- Permissions (appended) ---
    /// MDT to MDT: whether `cred` (squashed already) has `mask` (MAY_READ 4, MAY_WRITE
    /// 2, MAY_EXEC 1) on `fid`, checked by the MDT that holds it, ACL included.
    DnePermission {
        fid: Fid,
        cred: Cred,
        mask: u32,
    },
    /// Client to MDT: whether the caller has `mask` on `fid` (`access(2)`; asked before
    /// a truncate by path changes the OST objects).
    Access {
        fid: Fid,
        cred: Cred,
        mask: u32,
    },
    // --- LFSCK (appended) ---
    /// LFSCK between tools and targets and among targets (see [`crate::lfsck`]).
    Lfsck(crate::lfsck::LfsckRequest),

    // --- Recovery (appended) ---
    /// Client to MDT, first on every new connection (Lustre's `MDS_CONNECT`): who the
    /// client is, for the MDT's per-client record (`last_rcvd`). Answered with
    /// [`Reply::TargetConnected`]; from a client the MDT does not know, only once a recovery
    /// under way has ended.
    MdtConnect {
        client: ClientUuid,
    },
    /// A modifying request the client keeps until it is committed: the MDT answers with
    /// [`Reply::Tracked`] (its transno and `last_committed`).
    Tracked {
        client: ClientUuid,
        /// The client's request number (Lustre's xid), the same when the request is
        /// resent: the MDT answers a duplicate from its reply data instead of running it
        /// again.
        xid: u64,
        req: Box<Request>,
    },
    /// After the MDT restarted: one request the client had an answer for and that was not
    /// committed yet, sent again to be applied in transno order (Lustre's replay).
    Replay {
        client: ClientUuid,
        transno: u64,
        req: Box<Request>,
        /// What the first run decided, so the replay decides the same.
        outcome: Option<ReplayOutcome>,
    },
    /// The client has replayed everything it kept; answered when the recovery ends, with
    /// [`Reply::Recovered`].
    ReplayDone {
        client: ClientUuid,
    },
    /// A client unmounting (Lustre's `MDS_DISCONNECT`): the MDT forgets its record, so a
    /// restart does not wait for it to come back and replay.
    MdtDisconnect {
        client: ClientUuid,
    },
    // --- FLR (appended) ---
    /// A change of a mirrored file's mirrors or their sync state (see [`MirrorOp`]);
    /// answered with the file's inode and new layout.
    Mirror {
        fid: Fid,
        op: MirrorOp,
        cred: Cred,
    },
    // --- Erasure coding (appended) ---
    /// The client recomputed the parity of erasure-coded `fid` from layout generation
    /// `layout_gen` (at the close of `handle`, or a resync): clear `stale` on its parity
    /// components. EBUSY while another writer holds the file open, ESTALE when the layout
    /// moved on (a write open since); replies with the layout. Without the caller's own
    /// write handle, `cred` must have write permission on the file: parity declared in
    /// sync that is not would decode into bytes nobody wrote.
    EcParitySynced {
        fid: Fid,
        handle: Option<u64>,
        layout_gen: u32,
        cred: Cred,
    },
    // --- Object owners (appended) ---
    /// MDT to OST (Lustre's `OST_SETATTR` of a chown): objects `objs` of a file now owned
    /// by `uid`:`gid` take that owner; objects without data are left alone.
    OstSetOwner {
        objs: Vec<Fid>,
        uid: u32,
        gid: u32,
    },
    // --- Open replay (appended) ---
    /// After the MDT restarted: a handle the client held open, made again under its old
    /// number (Lustre's open replay), in the client's replay sequence. Only from a client
    /// the recovery waits for; checked as an open is, except that the file's owner may
    /// always reopen it (a `chmod 0` after the open must not make it fail).
    Reopen {
        client: ClientUuid,
        handle: u64,
        fid: Fid,
        flags: OpenFlags,
        cred: Cred,
    },
    // --- OST recovery (appended) ---
    /// Client to OST, first on every new connection (Lustre's `OST_CONNECT`): who the
    /// client is, so a restarted OST's recovery knows it. Answered with
    /// [`Reply::TargetConnected`]; from a client the OST does not wait for, only once a
    /// recovery under way has ended.
    OstConnect {
        client: ClientUuid,
    },
    /// Commit everything answered so far now (Lustre's soft sync), answered with
    /// [`Reply::Committed`]: a client whose kept writes reached their bound, or that
    /// unmounts, no longer needs to keep them.
    OstCommit,
    /// MDT to OST once its recovery is over (Lustre's orphan cleanup, `OBD_FL_DELORPHAN`):
    /// objects `from..=LAST_ID` of `seq` belong to no file the MDT kept (a power cut took
    /// back the creates that got them, and clients may have written them), so each one
    /// written goes back to a fresh precreated object before the MDT hands it out again.
    /// Answered with [`Reply::LastId`]; EOVERFLOW when the range is longer than
    /// [`ORPHAN_CLEANUP_MAX`] (the MDT then hands out ids past LAST_ID only).
    OstCleanOrphans {
        seq: u64,
        from: u32,
    },

    // --- Appends across clients (appended) ---
    /// Client to MDT: take `fid`'s append lock for `handle` (open for writing by this
    /// connection), waiting while another handle holds it; answered with
    /// [`Reply::AppendLocked`] (the file's inode). While it holds the lock no other client appends, so the
    /// end of file it reads stays the end until its write lands (Lustre's `[0, EOF]` lock
    /// for `O_APPEND`). See `nacre_mdt::append`.
    AppendLock {
        fid: Fid,
        handle: u64,
    },
    /// Client to MDT: give `fid`'s append lock back, its write landed.
    AppendUnlock {
        fid: Fid,
        handle: u64,
    },

    // --- File locks across clients (appended) ---
    /// Client to MDT: a byte-range lock on `fid` (`fcntl` and `flock`; Lustre's LDLM flock
    /// locks) for lock owner `owner` of this client, through `handle`, which this
    /// connection holds open on `fid`. Answered with [`Reply::Flock`]. See
    /// `nacre_mdt::flock`.
    Flock {
        fid: Fid,
        handle: u64,
        owner: u64,
        /// The client's node (its kernel and pid namespace): locks of one process through
        /// two mounts on one node are told apart by owner but seen as one process's by
        /// deadlock detection.
        node: u64,
        op: FlockOp,
    },

    // --- Size settles (appended) ---
    /// Makes `objs` durable, then answers as [`Request::OstGetattr`] does (Lustre's
    /// `OST_SYNC`, whose reply carries the object's attributes): what an MDT's size settle
    /// asks of each OST, once for a batch of files, instead of a sync and a glimpse.
    OstSyncGetattr {
        objs: Vec<Fid>,
    },

    // --- OST pools (appended) ---
    /// `lctl pool_new/pool_destroy/pool_add/pool_remove FSNAME.POOL`: the MGS changes its
    /// configuration's pools (see `nacre_core::pool::apply`).
    MgsPool {
        pool: String,
        op: nacre_core::pool::PoolOp,
    },

    // --- Append locks through a restart (appended) ---
    /// Client to MDT, in its replay after the MDT restarted (after the handle's reopen):
    /// the append lock `handle` kept before the restart is its again, so no other client
    /// appends at an end of file that leaves out the bytes it appended under the lock and
    /// has not sent yet (Lustre replays its extent locks). Runs while the MDT recovers;
    /// EBUSY when another handle holds the lock already. See `nacre_mdt::append`.
    AppendReclaim {
        fid: Fid,
        handle: u64,
    },
}

pub use nacre_core::flock::{FileLock, FlockMode};

/// What a [`Request::Flock`] asks.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum FlockOp {
    /// `F_GETLK`: the first lock of another owner that would keep this one from being
    /// taken, if any.
    Test(FileLock),
    /// `F_SETLK` (take, change or give back a range); with `wait` (`F_SETLKW`) the MDT
    /// remembers the waiter and calls it back when a lock of the file goes, and a
    /// conflict that would deadlock is EDEADLK.
    Set { lock: FileLock, wait: bool },
    /// Every lock the owner holds on the file goes (a `close` of any of its descriptors
    /// of the file, as POSIX has it).
    ReleaseOwner,
    /// A lock the client held before the MDT restarted, taken again in its replay (after
    /// its handle's reopen): it runs while the MDT recovers, when nobody else can take a
    /// lock yet.
    Reclaim(FileLock),
}

/// Lustre's `OST_MAX_PRECREATE`: the most objects an OST precreates in one request and
/// an MDT's pool holds (the highest `max_create_count`).
pub const OST_MAX_PRECREATE: u32 = 20_000;

/// The longest range of objects one orphan cleanup resets (Lustre's ofd ignores an
/// orphan destroy reaching further back than `OST_MAX_PRECREATE`): more than an MDT ever
/// has precreated and not handed out.
pub const ORPHAN_CLEANUP_MAX: u32 = OST_MAX_PRECREATE;

/// The most objects one object-list request to an OST names ([`Request::OstGetattr`],
/// [`Request::OstSync`], [`Request::OstSyncGetattr`], [`Request::OstDestroy`],
/// [`Request::OstSetOwner`]): an OST refuses a longer list with EINVAL, so one request
/// cannot hold its I/O thread for millions of objects (a 16 MiB body holds a million
/// FIDs). Twice a layout's stripes ([`nacre_core::layout::MAX_STRIPE_COUNT`]); senders
/// make their requests with [`ost_obj_lists`].
pub const OST_OBJS_MAX: usize = 4096;

/// `objs` (each with its OST) as requests: by OST in index order, each OST's in the
/// order given, at most [`OST_OBJS_MAX`] a request.
pub fn ost_obj_lists<T>(objs: impl IntoIterator<Item = (u32, T)>) -> Vec<(u32, Vec<T>)> {
    let mut by_ost: std::collections::BTreeMap<u32, Vec<Vec<T>>> = Default::default();
    for (ost, o) in objs {
        let lists = by_ost.entry(ost).or_default();
        match lists.last_mut() {
            Some(l) if l.len() < OST_OBJS_MAX => l.push(o),
            _ => lists.push(vec![o]),
        }
    }
    by_ost
        .into_iter()
        .flat_map(|(ost, lists)| lists.into_iter().map(move |l| (ost, l)))
        .collect()
}

/// What [`Request::Mirror`] asks the MDT to do (Lustre's FLR layout intents and lease
/// closes).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum MirrorOp {
    /// A write of `[start, end)` goes to mirrors `keep` only: the other mirrors' components
    /// overlapping it become stale and the file write-pending (Lustre's write intent).
    Write {
        start: u64,
        end: u64,
        keep: Vec<u32>,
    },
    /// A resync begins (Lustre's resync lease): refused while anyone has the file open for
    /// writing; the file becomes sync-pending.
    ResyncStart,
    /// A resync ends: components `ids` hold the in-sync data again, unless a writer opened
    /// the file or its layout changed since generation `layout_gen` (then EBUSY). An empty
    /// `ids` gives the resync up.
    ResyncDone { layout_gen: u32, ids: Vec<u32> },
    /// `lfs mirror extend`: new mirrors (their components numbered by mirror 1, 2, ...),
    /// added stale, for a resync to fill.
    Extend { components: Vec<Component> },
    /// `lfs mirror split`: mirror `mirror_id` leaves the file; its objects are destroyed,
    /// or become the layout of the empty file `victim` (whose own objects are destroyed).
    Split { mirror_id: u32, victim: Option<Fid> },
}

/// A client mount's identity on an MDT across its connections (Lustre's client UUID).
pub type ClientUuid = u64;

/// What a create decided the first time: the FID and the layout (with its objects) it
/// made, which its replay must make again.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ReplayOutcome {
    pub fid: Fid,
    pub layout: Option<Layout>,
}

/// A directory layout asked for at mkdir (`lfs mkdir`) or inherited from a default.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct DirLayoutRequest {
    /// 0 or 1: one stripe (a plain directory); -1: every MDT; N: N stripes.
    pub stripe_count: i32,
    /// The MDT of the first stripe; -1: the file system chooses (MDT QoS).
    pub stripe_offset: i32,
    /// Explicit MDTs in stripe order (`-i 1,3`); empty: consecutive from the offset.
    pub mdts: Vec<u32>,
    /// `lmv_hash_type`; 0: the default (fnv_1a_64).
    pub hash_type: u32,
}

/// An object a distributed operation creates on a participant MDT.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct DneObject {
    pub attr: Attr,
    /// A striped directory's master: its stripes.
    pub lmv: Option<Lmv>,
    pub default_layout: Option<Layout>,
    pub default_lmv: Option<LmvTemplate>,
    pub links: Vec<(Fid, Vec<u8>)>,
    /// A stripe object: its master directory and stripe index.
    pub stripe_of: Option<(Fid, u32)>,
    /// Extended attributes it starts with (ACLs inherited from its parent's default).
    pub xattrs: Vec<(Vec<u8>, Vec<u8>)>,
}

/// One step of a distributed operation, run on the MDT that holds its object: names on
/// the MDT of their directory, inode changes on the MDT of the inode.
///
/// Each has a prepare part (checks, and whatever can still be undone), a commit part
/// (what cannot be undone, such as destroying an inode) and an abort part (undoing the
/// prepare). All three are idempotent, so they can be sent again after a lost reply.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum DneUpdate {
    /// A new inode no name points to yet.
    CreateObject(DneObject),
    /// `parent/name -> fid`; the directory's nlink counts a new subdirectory.
    InsertName {
        parent: Fid,
        name: Vec<u8>,
        fid: Fid,
        kind: FileKind,
        now: Timespec,
    },
    /// Removes `parent/name`, which must point to `fid`.
    DeleteName {
        parent: Fid,
        name: Vec<u8>,
        fid: Fid,
        kind: FileKind,
        now: Timespec,
    },
    /// Points `parent/name` at `new` instead of `old` (rename over a target, exchange).
    SetName {
        parent: Fid,
        name: Vec<u8>,
        old: (Fid, FileKind),
        new: (Fid, FileKind),
        now: Timespec,
    },
    /// One more link of a file (hard link).
    AddLink {
        fid: Fid,
        parent: Fid,
        name: Vec<u8>,
        now: Timespec,
    },
    /// One link fewer; the inode goes with its last link (kept while open).
    DropLink {
        fid: Fid,
        parent: Fid,
        name: Vec<u8>,
        now: Timespec,
    },
    /// Moves a link of `fid` from `from` to `to` (rename).
    Relink {
        fid: Fid,
        from: (Fid, Vec<u8>),
        to: (Fid, Vec<u8>),
        now: Timespec,
    },
    /// Removes an empty directory (or directory stripe); new entries are refused once
    /// it is prepared.
    KillDir { fid: Fid, now: Timespec },
}

impl DneUpdate {
    /// The object whose MDT runs this update: the directory of a name, else the inode.
    pub fn object(&self) -> Fid {
        match self {
            DneUpdate::CreateObject(o) => o.attr.fid,
            DneUpdate::InsertName { parent, .. }
            | DneUpdate::DeleteName { parent, .. }
            | DneUpdate::SetName { parent, .. } => *parent,
            DneUpdate::AddLink { fid, .. }
            | DneUpdate::DropLink { fid, .. }
            | DneUpdate::Relink { fid, .. }
            | DneUpdate::KillDir { fid, .. } => *fid,
        }
    }
}

/// A coordinator's answer about one of its distributed operations.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum DneOpState {
    /// Not decided yet: ask again later.
    InProgress,
    Committed,
    /// Never committed and never will.
    Aborted,
}

/// Replies. Every request has exactly one.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum Reply {
    Ok,
    Error(Errno),
    Pong {
        target: String,
    },
    Config(FsConfig),
    Statfs(StatFs),
    Inode(InodeInfo),
    Created {
        inode: InodeInfo,
        handle: Option<u64>,
    },
    /// An open handle; a small Data-on-MDT file's bytes may follow as bulk (read-on-open),
    /// with their checksums in `data_cksum`.
    Opened {
        inode: InodeInfo,
        handle: u64,
        data_cksum: Option<BulkCksum>,
    },
    Dirents {
        entries: Vec<Dirent>,
        eof: bool,
    },
    Data(Vec<u8>),
    Names(Vec<Vec<u8>>),
    Layout(Option<Layout>),
    Path(Vec<u8>),
    /// Attributes of objects, in request order (`None`: object missing).
    ObjAttrs(Vec<Option<ObjAttr>>),
    /// Bytes written.
    Written(u64),
    LastId(u32),

    // --- DNE (appended) ---
    /// The name lives here but its inode on another MDT: ask that MDT (by the FID's
    /// sequence) for the inode (Lustre's -EREMOTE lookup).
    RemoteFid(Fid),
    DefaultLmv(Option<LmvTemplate>),
    DneState(DneOpState),
    Seq(u64),
    /// A name entry: the child and its type.
    Entry {
        fid: Fid,
        kind: FileKind,
    },
    Links {
        links: Vec<(Fid, Vec<u8>)>,
        stripe_of: Option<(Fid, u32)>,
    },
    /// Distributed operations prepared here for other MDTs, and committed here with
    /// participants still to tell.
    DneStatus {
        pending: u64,
        committed: u64,
    },
    /// An object's extent map; `None`: the OST's file system has none.
    ObjExtents(Option<Vec<nacre_core::fiemap::ObjExtent>>),
    /// Cache callbacks up to sequence `upto`: drop what is cached of `fids` (of
    /// everything, with `all`).
    Callbacks {
        upto: u64,
        fids: Vec<Fid>,
        all: bool,
    },
    /// A read's bulk follows, with the checksums of its pieces.
    Checksummed(BulkCksum),
    Lfsck(crate::lfsck::LfsckReply),
    /// An OST write's bytes written and the grant added for the writer (Lustre's
    /// `o_grant` in a brw reply).
    OstWritten {
        written: u64,
        grant: u64,
    },

    // --- Recovery (appended) ---
    /// The target's boot instance (new at every start: a change tells the client the target
    /// restarted and may have lost what it had not committed) and its `last_committed`.
    TargetConnected {
        instance: u64,
        last_committed: u64,
    },
    /// A tracked request's answer: the transaction number it was committed under (0: it
    /// changed nothing, so there is nothing to replay) and the highest transno on stable
    /// storage (Lustre's `pb_transno` and `pb_last_committed`).
    Tracked {
        transno: u64,
        last_committed: u64,
        reply: Box<Reply>,
    },
    /// The recovery ended: everything replayed is committed up to `last_committed`.
    Recovered {
        last_committed: u64,
    },
    // --- OST recovery (appended) ---
    /// [`Request::OstCommit`]'s answer: everything up to `last_committed` is durable.
    Committed {
        last_committed: u64,
    },
    /// The append lock is the handle's ([`Request::AppendLock`]), with the file's inode;
    /// `keep`: the client may keep it after this append, until a callback for the file.
    AppendLocked {
        inode: InodeInfo,
        keep: bool,
    },
    /// [`Request::Flock`]'s answer: `None`, taken (or given back); else the lock of
    /// another owner in the way (for [`FlockOp::Test`], the one that would be).
    Flock {
        conflict: Option<FileLock>,
    },
}

/// The variants that carry the caller's credentials.
macro_rules! with_cred {
    ($req:expr, $cred:ident => $e:expr) => {
        match $req {
            Request::Lookup { $cred, .. }
            | Request::Setattr { $cred, .. }
            | Request::Create { $cred, .. }
            | Request::Open { $cred, .. }
            | Request::Unlink { $cred, .. }
            | Request::Rename { $cred, .. }
            | Request::Link { $cred, .. }
            | Request::Readdir { $cred, .. }
            | Request::GetXattr { $cred, .. }
            | Request::ListXattr { $cred, .. }
            | Request::SetXattr { $cred, .. }
            | Request::RemoveXattr { $cred, .. }
            | Request::SetLayout { $cred, .. }
            | Request::SetDefaultLmv { $cred, .. }
            | Request::AddComponents { $cred, .. }
            | Request::DelComponents { $cred, .. }
            | Request::CreateVolatile { $cred, .. }
            | Request::SwapLayouts { $cred, .. }
            | Request::Mkdir { $cred, .. }
            | Request::Access { $cred, .. }
            | Request::DnePermission { $cred, .. }
            | Request::Mirror { $cred, .. }
            | Request::EcParitySynced { $cred, .. }
            | Request::Reopen { $cred, .. } => Some($e),
            _ => None,
        }
    };
}

impl Request {
    pub fn opcode(&self) -> u16 {
        match self {
            Request::Ping => 0,
            Request::MgsRegister { .. } => 1,
            Request::MgsGetConfig { .. } => 2,
            Request::MgsSetParam { .. } => 3,
            Request::Statfs => 10,
            Request::Lookup { .. } => 11,
            Request::Getattr { .. } => 12,
            Request::Setattr { .. } => 13,
            Request::Create { .. } => 14,
            Request::Open { .. } => 15,
            Request::Close { .. } => 16,
            Request::Unlink { .. } => 17,
            Request::Rename { .. } => 18,
            Request::Link { .. } => 19,
            Request::Readdir { .. } => 20,
            Request::Readlink { .. } => 21,
            Request::GetXattr { .. } => 22,
            Request::ListXattr { .. } => 23,
            Request::SetXattr { .. } => 24,
            Request::RemoveXattr { .. } => 25,
            Request::SetLayout { .. } => 26,
            Request::GetDefaultLayout { .. } => 27,
            Request::LayoutIntent { .. } => 28,
            Request::Fid2Path { .. } => 29,
            Request::SetDefaultLmv { .. } => 30,
            Request::OstWrite { .. } => 40,
            Request::OstRead { .. } => 41,
            Request::OstGetattr { .. } => 42,
            Request::OstPunch { .. } => 43,
            Request::OstDestroy { .. } => 44,
            Request::OstSync { .. } => 45,
            Request::OstStatfs => 46,
            Request::OstPrecreate { .. } => 47,
            Request::OstGetLastId { .. } => 48,
            Request::OstFallocate { .. } => 49,
            Request::DomWrite { .. } => 50,
            Request::DomRead { .. } => 51,
            Request::DomSync { .. } => 52,
            Request::DomFallocate { .. } => 53,
            Request::AddComponents { .. } => 54,
            Request::DelComponents { .. } => 55,
            Request::CreateVolatile { .. } => 56,
            Request::SwapLayouts { .. } => 57,
            Request::Mkdir { .. } => 31,
            Request::GetDefaultLmv { .. } => 32,
            Request::DnePrepare { .. } => 60,
            Request::DneCommit { .. } => 61,
            Request::DneAbort { .. } => 62,
            Request::DneResolve { .. } => 63,
            Request::DneSeqGrant { .. } => 64,
            Request::DneLookup { .. } => 65,
            Request::DneLinks { .. } => 66,
            Request::DneStatus => 68,
            Request::DneRenameLock { .. } => 69,
            Request::OstFiemap { .. } => 58,
            Request::WaitCallbacks { .. } => 70,
            Request::Sync { .. } => 71,
            Request::DnePermission { .. } => 72,
            Request::Access { .. } => 73,
            Request::Lfsck(_) => 74,
            Request::MdtConnect { .. } => 75,
            Request::Tracked { req, .. } => req.opcode(),
            Request::Replay { .. } => 76,
            Request::ReplayDone { .. } => 77,
            Request::MdtDisconnect { .. } => 78,
            Request::Mirror { .. } => 79,
            Request::EcParitySynced { .. } => 80,
            Request::OstSetOwner { .. } => 81,
            Request::Reopen { .. } => 82,
            Request::OstConnect { .. } => 83,
            Request::OstCommit => 84,
            Request::OstCleanOrphans { .. } => 85,
            Request::AppendLock { .. } => 86,
            Request::AppendUnlock { .. } => 87,
            Request::Flock { .. } => 88,
            Request::OstSyncGetattr { .. } => 89,
            Request::MgsPool { .. } => 90,
            Request::AppendReclaim { .. } => 91,
        }
    }

    /// The name `lctl get_param *.stats` shows for an opcode.
    pub fn op_name(opcode: u16) -> &'static str {
        match opcode {
            0 => "ping",
            1 => "mgs_register",
            2 => "mgs_get_config",
            3 => "mgs_set_param",
            10 => "statfs",
            11 => "lookup",
            12 => "getattr",
            13 => "setattr",
            14 => "create",
            15 => "open",
            16 => "close",
            17 => "unlink",
            18 => "rename",
            19 => "link",
            20 => "readdir",
            21 => "readlink",
            22 => "getxattr",
            23 => "listxattr",
            24 => "setxattr",
            25 => "removexattr",
            26 => "setlayout",
            27 => "get_default_layout",
            28 => "layout_intent",
            29 => "fid2path",
            30 => "set_default_lmv",
            40 => "ost_write",
            41 => "ost_read",
            42 => "ost_getattr",
            43 => "ost_punch",
            44 => "ost_destroy",
            45 => "ost_sync",
            46 => "ost_statfs",
            47 => "ost_precreate",
            48 => "ost_get_last_id",
            49 => "ost_fallocate",
            50 => "dom_write",
            51 => "dom_read",
            52 => "dom_sync",
            53 => "dom_fallocate",
            54 => "add_components",
            55 => "del_components",
            56 => "create_volatile",
            57 => "swap_layouts",
            58 => "ost_fiemap",
            31 => "mkdir",
            32 => "get_default_lmv",
            60 => "dne_prepare",
            61 => "dne_commit",
            62 => "dne_abort",
            63 => "dne_resolve",
            64 => "dne_seq_grant",
            65 => "dne_lookup",
            66 => "dne_links",
            68 => "dne_status",
            69 => "dne_rename_lock",
            70 => "wait_callbacks",
            71 => "sync",
            72 => "dne_permission",
            73 => "access",
            74 => "lfsck",
            75 => "mds_connect",
            76 => "replay",
            77 => "replay_done",
            78 => "mds_disconnect",
            79 => "mirror",
            80 => "ec_parity_synced",
            81 => "ost_setattr",
            82 => "reopen",
            83 => "ost_connect",
            84 => "ost_commit",
            85 => "ost_clean_orphans",
            86 => "append_lock",
            87 => "append_unlock",
            88 => "ldlm_flock",
            89 => "ost_sync_getattr",
            90 => "mgs_pool",
            91 => "append_reclaim",
            _ => "other",
        }
    }

    /// Read-only requests a server answers in microseconds, from local state: it answers
    /// them as they arrive instead of giving each a task.
    /// A request the target holds until something happens (a long poll): it changes
    /// nothing, so a caller that gives up on it needs no ordering after it, and the target
    /// drops it when its connection is replaced ([`crate::reconnect`]).
    pub fn is_long_poll(&self) -> bool {
        matches!(self, Request::WaitCallbacks { .. })
    }

    pub fn is_quick(&self) -> bool {
        matches!(
            self,
            Request::Ping
                | Request::Lookup { .. }
                | Request::Getattr { .. }
                | Request::DnePermission { .. }
                | Request::Access { .. }
                | Request::Readlink { .. }
                | Request::GetXattr { .. }
                | Request::ListXattr { .. }
                | Request::OstGetattr { .. }
        )
    }

    /// The caller's credentials, for the MDT to check.
    pub fn cred(&self) -> Option<&Cred> {
        if let Request::Tracked { req, .. } | Request::Replay { req, .. } = self {
            return req.cred();
        }
        with_cred!(self, cred => cred)
    }

    /// The caller's credentials, for the MDT to squash. MDT-to-MDT requests carry the
    /// credentials the coordinating MDT squashed already: they are not for squashing.
    pub fn cred_mut(&mut self) -> Option<&mut Cred> {
        if matches!(self, Request::DnePermission { .. }) {
            return None;
        }
        with_cred!(self, cred => cred)
    }

    /// Bytes of bulk data the reply to this request may carry (for memory accounting).
    pub fn reply_bulk_bytes(&self) -> u64 {
        match self {
            Request::OstRead { len, .. } | Request::DomRead { len, .. } => u64::from(*len),
            _ => 0,
        }
    }

    /// Sent only by the servers themselves (Lustre's MDT-to-MDT updates, the OSP's object
    /// create and destroy, LFSCK, target registration and `set_param -P`): a target
    /// refuses it with EPERM from a peer that proved only the client key (see
    /// [`crate::auth::PeerRole`]). A client could otherwise destroy any object, forge a
    /// distributed update or point the MGS at its own address.
    pub fn needs_server_role(&self) -> bool {
        match self {
            Request::Tracked { req, .. } | Request::Replay { req, .. } => req.needs_server_role(),
            Request::MgsRegister { .. }
            | Request::MgsSetParam { .. }
            | Request::MgsPool { .. }
            | Request::OstDestroy { .. }
            | Request::OstPrecreate { .. }
            | Request::OstGetLastId { .. }
            | Request::OstCleanOrphans { .. }
            | Request::OstSetOwner { .. }
            | Request::DnePrepare { .. }
            | Request::DneCommit { .. }
            | Request::DneAbort { .. }
            | Request::DneResolve { .. }
            | Request::DneSeqGrant { .. }
            | Request::DneLookup { .. }
            | Request::DneLinks { .. }
            | Request::DneRenameLock { .. }
            | Request::DnePermission { .. }
            | Request::Lfsck(_) => true,
            _ => false,
        }
    }

    /// A client's change to an OST object that the OST gives a transno when it comes
    /// tracked, and that the client keeps and replays after a restart of the OST.
    pub fn is_ost_replayable(&self) -> bool {
        matches!(
            self,
            Request::OstWrite { .. } | Request::OstPunch { .. } | Request::OstFallocate { .. }
        )
    }

    /// Whether an object-list request names at most [`OST_OBJS_MAX`] objects (other
    /// requests bound their lists elsewhere).
    pub fn objects_within_bounds(&self) -> bool {
        match self {
            Request::OstGetattr { objs }
            | Request::OstSync { objs }
            | Request::OstSyncGetattr { objs }
            | Request::OstDestroy { objs }
            | Request::OstSetOwner { objs, .. } => objs.len() <= OST_OBJS_MAX,
            _ => true,
        }
    }

    /// Safe to send again after a lost connection: running it twice has the effect of once.
    pub fn is_idempotent(&self) -> bool {
        if let Request::Tracked { .. } = self {
            // The MDT answers a resent request number from its reply data.
            return true;
        }
        !matches!(
            self,
            Request::Create { .. }
                | Request::Open { .. }
                | Request::AddComponents { .. }
                | Request::DelComponents { .. }
                | Request::CreateVolatile { .. }
                | Request::SwapLayouts { .. }
                | Request::Mirror { .. }
                | Request::Close { .. }
                | Request::Unlink { .. }
                | Request::Rename { .. }
                | Request::Link { .. }
                | Request::SetXattr { .. }
                | Request::RemoveXattr { .. }
                | Request::Mkdir { .. }
                | Request::Replay { .. }
                // A second grant would only waste a sequence, but the first is lost.
                | Request::DneSeqGrant { .. }
                // A lost grant would hold the lock until its lease ends.
                | Request::DneRenameLock { acquire: true, .. }
        )
    }
}

/// Body encoding: postcard. Our types encode into a `Vec` without error unless a
/// `Serialize` impl refuses its value; that is a defect, reported as EPROTO and logged,
/// never sent as an empty body.
pub fn encode<T: Serialize>(v: &T) -> Result<Vec<u8>, Errno> {
    postcard::to_allocvec(v).map_err(|e| {
        tracing::error!(target: "rpc", "cannot encode a message: {e}");
        Errno::EPROTO
    })
}

pub fn decode<'a, T: Deserialize<'a>>(b: &'a [u8]) -> Result<T, postcard::Error> {
    postcard::from_bytes(b)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn object_lists_past_the_bound_are_split_in_order_and_refused_whole() {
        let fids: Vec<Fid> = (0..OST_OBJS_MAX as u32 * 2 + 3)
            .map(|i| Fid::new(0x100000000, i + 1, 0))
            .collect();
        let lists = ost_obj_lists(
            fids.iter()
                .map(|f| (3, *f))
                .chain(std::iter::once((1, fids[0]))),
        );
        let sizes: Vec<(u32, usize)> = lists.iter().map(|(o, l)| (*o, l.len())).collect();
        assert_eq!(
            sizes,
            [(1, 1), (3, OST_OBJS_MAX), (3, OST_OBJS_MAX), (3, 3)]
        );
        let rejoined: Vec<Fid> = lists[1..].iter().flat_map(|(_, l)| l.clone()).collect();
        assert_eq!(rejoined, fids);
        assert!(
            lists.iter().all(|(_, objs)| {
                Request::OstSync { objs: objs.clone() }.objects_within_bounds()
            })
        );
        let long = fids[..=OST_OBJS_MAX].to_vec();
        for req in [
            Request::OstGetattr { objs: long.clone() },
            Request::OstSync { objs: long.clone() },
            Request::OstSyncGetattr { objs: long.clone() },
            Request::OstDestroy { objs: long.clone() },
            Request::OstSetOwner {
                objs: long,
                uid: 0,
                gid: 0,
            },
        ] {
            assert!(
                !req.objects_within_bounds(),
                "{}",
                Request::op_name(req.opcode())
            );
        }
    }

    #[test]
    fn requests_round_trip() {
        let reqs = vec![
            Request::Ping,
            Request::Lookup {
                parent: Fid::ROOT,
                name: b"hello".to_vec(),
                cred: Cred::root(),
            },
            Request::Create {
                parent: Fid::ROOT,
                name: b"f".to_vec(),
                mode: 0o100644,
                rdev: 0,
                cred: Cred::user(1, 2, vec![3], 1 << cap::FOWNER),
                symlink: None,
                layout: LayoutRequest::Explicit(Layout::plain(2, 1 << 20, -1)),
                open: Some(OpenFlags::default()),
                exclusive: true,
            },
            Request::OstWrite {
                obj: Fid::new(0x240000400, 5, 0),
                parent: Fid::ROOT,
                offset: 1 << 40,
                cksum: Some(BulkCksum {
                    kind: nacre_core::cksum::ChecksumType::Crc32c,
                    sums: vec![1, u32::MAX],
                }),
                grant: WriteGrant {
                    from_grant: true,
                    want: 1 << 30,
                },
                layout: Some(OstLayout {
                    stripe_size: 1 << 20,
                    stripe_count: 4,
                    comp_start: 0,
                    comp_end: u64::MAX,
                    comp_id: 1,
                }),
            },
            Request::OstFallocate {
                obj: Fid::new(0x240000400, 5, 0),
                parent: Fid::ROOT,
                offset: 4096,
                len: 1 << 20,
                mode: 3,
            },
        ];
        for r in reqs {
            let b = encode(&r).expect("encode");
            assert_eq!(decode::<Request>(&b).ok(), Some(r));
        }
    }

    #[test]
    fn garbage_bodies_are_errors_not_panics() {
        use rand::{Rng, SeedableRng};
        let mut rng = rand::rngs::StdRng::seed_from_u64(11);
        for _ in 0..20_000 {
            let n = rng.gen_range(0..64);
            let v: Vec<u8> = (0..n).map(|_| rng.r#gen()).collect();
            let _ = decode::<Request>(&v);
            let _ = decode::<Reply>(&v);
        }
    }
}
