//! LFSCK's messages (Lustre's `LFSCK_NOTIFY`/`LFSCK_QUERY` RPCs and the OUT updates its
//! assistants send): a tool or the sponsor MDT starting, stopping and querying runs on a
//! target; MDTs asking each other about names and objects and repairing them; MDTs
//! checking their files' objects on OSTs; OSTs handing back objects no file referenced.
//!
//! Every repair is checked again by the target that makes it, against its state at that
//! moment, so a repair sent twice, or sent after the namespace moved on, does nothing.

use nacre_core::lmv::Lmv;
use nacre_core::{Errno, Fid, FileKind, OstLayout, TargetName};
use serde::{Deserialize, Serialize};

/// `lctl lfsck_start` as a target receives it (`struct lfsck_start`, plus who sent it).
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct StartArgs {
    /// `LSV_*`: which of the fields below were given.
    pub valid: u32,
    pub speed_limit: u32,
    /// Type bits (`TYPE_*` of `nacre_lustreapi::lfsck`); 0: the target chooses.
    pub active: u16,
    /// `LPF_*`.
    pub flags: u16,
    pub async_windows: u16,
    /// Check only the subtree under this directory (nacre's `--path`).
    pub root: Option<Fid>,
    /// The MDTs taking part: OSTs wait for each of them to finish its first phase.
    pub mdts: Vec<u32>,
    /// The MDT that sent it on (with `-A`); `None` when it came from a tool.
    pub sponsor: Option<u32>,
}

/// A phase a participant finished, sent to the others that wait for it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum Event {
    /// An MDT checked every name and object it holds (namespace phase 1).
    NamespacePhase1Done,
    /// An MDT checked every layout it holds against the OSTs (layout phase 1).
    LayoutPhase1Done,
    /// An OST finished handing back its orphans (layout phase 2).
    LayoutOrphansDone,
    /// A participant stopped or failed: nobody should wait for it.
    Gone,
}

/// One component's state on a target, for `lfsck_query`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ComponentState {
    /// Type bit.
    pub kind: u16,
    /// `enum lfsck_status` index.
    pub status: u8,
    pub repaired: u64,
}

/// What a name entry is, as the MDT of its directory sees it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum DirentFact {
    /// No such directory here.
    ParentMissing,
    /// The parent is not a directory, or is the master of a striped directory (whose
    /// names live in its stripes).
    NotPlainDir,
    Absent,
    Present {
        fid: Fid,
        kind: FileKind,
    },
}

/// What the namespace checks need of an object, from the MDT holding it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ObjFacts {
    pub fid: Fid,
    pub mode: u32,
    pub nlink: u32,
    pub links: Vec<(Fid, Vec<u8>)>,
    /// A directory stripe: its master and index.
    pub stripe_of: Option<(Fid, u32)>,
    pub lmv: Option<Lmv>,
    /// A distributed operation in flight involves it: leave it alone.
    pub busy: bool,
    /// Unlinked but still open (waiting for its last close).
    pub open_unlinked: bool,
}

impl ObjFacts {
    pub fn kind(&self) -> Option<FileKind> {
        FileKind::from_mode(self.mode)
    }
}

/// A question about another MDT's names and objects.
#[derive(Clone, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum NsQuery {
    Entry {
        parent: Fid,
        name: Vec<u8>,
    },
    Object {
        fid: Fid,
    },
    /// Whether file `parent`'s layout holds object `obj` of OST `ost` as stripe `stripe`.
    Claims {
        parent: Fid,
        ost: u32,
        obj: Fid,
        stripe: u32,
    },
}

/// The answer to an [`NsQuery`], in order.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum NsFact {
    Entry(DirentFact),
    Object(Option<ObjFacts>),
    /// `None`: no such file.
    Claims(Option<bool>),
    Failed(Errno),
}

/// A repair of another MDT's names or objects (or of this MDT's own, made the same way).
/// Each says what it expects to find; the MDT checks that before changing anything.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum NsRepair {
    /// Adds link (`parent`, `name`) to `fid`'s linkEA.
    AddLink {
        fid: Fid,
        parent: Fid,
        name: Vec<u8>,
    },
    /// Removes link (`parent`, `name`) from `fid`'s linkEA.
    RemoveLink {
        fid: Fid,
        parent: Fid,
        name: Vec<u8>,
    },
    /// A directory's linkEA becomes (`parent`, `name`) only.
    SetDirLink {
        fid: Fid,
        parent: Fid,
        name: Vec<u8>,
    },
    /// `fid`'s link count becomes `nlink` (it was `old`).
    SetNlink { fid: Fid, old: u32, nlink: u32 },
    /// Puts back the lost name entry `parent/name -> fid`.
    InsertName {
        parent: Fid,
        name: Vec<u8>,
        fid: Fid,
        kind: FileKind,
    },
    /// Removes `parent/name`, which must still point to `fid`.
    DeleteName {
        parent: Fid,
        name: Vec<u8>,
        fid: Fid,
    },
    /// Points `parent/name` at `new` instead of `old` (and fixes its type and inode
    /// number).
    SetName {
        parent: Fid,
        name: Vec<u8>,
        old: Fid,
        new: Fid,
        kind: FileKind,
    },
    /// Creates the object a dangling name points to, empty, with that one name (`-C`),
    /// or a lost stripe of a striped directory (`stripe_of` its master and index).
    CreateObject {
        fid: Fid,
        kind: FileKind,
        parent: Fid,
        name: Vec<u8>,
        uid: u32,
        gid: u32,
        stripe_of: Option<(Fid, u32)>,
    },
    /// A directory stripe's record of its master and index.
    SetStripeOf { fid: Fid, master: Fid, index: u32 },
    /// Slot `index` of striped directory `master` holds `stripe` (on MDT `mdt`) instead of
    /// `old`.
    SetLmvSlot {
        master: Fid,
        index: u32,
        old: Fid,
        stripe: Fid,
        mdt: u32,
    },
    /// A dry run: the link (`parent`, `name`) of `fid` exists as a name entry elsewhere;
    /// count it when checking `fid`'s links and link count, change nothing.
    Trace {
        fid: Fid,
        parent: Fid,
        name: Vec<u8>,
    },
    /// Makes `.lustre/lost+found` (on MDT0) if it is not there.
    LostFound,
}

/// What became of a repair.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum Outcome {
    Repaired,
    /// Nothing was wrong any more (someone changed it meanwhile).
    Unneeded,
    Failed(Errno),
}

/// Where an OST object is.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum ObjPresence {
    /// It has a file.
    File,
    /// Created (at or below LAST_ID) without a file by a store that made files lazily,
    /// and never written: reads as empty.
    Empty,
    /// Created with its file (or written), and its file is gone.
    Lost,
    /// Above LAST_ID: never created.
    NotCreated,
}

/// An object one of the MDT's files references.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Probe {
    pub obj: Fid,
    /// The file, with the stripe index in `ver` (what its filter fid should say).
    pub parent: Fid,
}

/// What an OST knows of a probed object.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ObjState {
    pub presence: ObjPresence,
    /// Its filter fid: the file and stripe index it believes it belongs to.
    pub ff: Option<Fid>,
    /// The owner recorded on it (set by a chown of the file), if any.
    pub owner: Option<(u32, u32)>,
    pub size: u64,
}

/// A repair of an OST object, asked by the MDT of the file.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum OstRepair {
    /// The object's filter fid becomes `parent` (it was `old`).
    SetFilterFid {
        obj: Fid,
        old: Option<Fid>,
        parent: Fid,
        /// The layout of the stripe's component, kept beside the filter fid.
        layout: Option<OstLayout>,
    },
    /// The object's owner becomes the file's.
    SetOwner { obj: Fid, uid: u32, gid: u32 },
    /// Creates a lost (dangling) object, empty, belonging to `parent` (`-c`).
    Create {
        obj: Fid,
        parent: Fid,
        uid: u32,
        gid: u32,
    },
    /// Sequence `seq`'s LAST_ID becomes `last` (it was behind the highest object there).
    SetLastId { seq: u64, last: u32 },
}

/// An object no file referenced during phase 1, handed to the MDT of its parent.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct OrphanObj {
    pub obj: Fid,
    pub ff: Option<Fid>,
    /// The layout kept with the filter fid: what a lost file is rebuilt from.
    pub layout: Option<OstLayout>,
    pub owner: Option<(u32, u32)>,
    pub size: u64,
}

/// What the MDT did with an orphan.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum OrphanOutcome {
    /// A file does reference it (it was created or attached after the scan passed).
    Referenced,
    /// Put back into its file's layout.
    Reattached,
    /// A new file in `.lustre/lost+found/MDTxxxx` holds it.
    LostFound,
    /// Found, not handled (a dry run, or `-o` not given).
    Found,
    Failed(Errno),
}

/// Requests of LFSCK.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum LfsckRequest {
    Start(StartArgs),
    /// `all`: the sponsor passes the stop on to every participant.
    Stop {
        all: bool,
    },
    /// The state of this target's components.
    Query,
    Notify {
        from: TargetName,
        event: Event,
    },
    /// MDT to MDT.
    NsFacts(Vec<NsQuery>),
    /// MDT to MDT.
    NsRepair(Vec<NsRepair>),
    /// MDT to OST; `mdt` is the sender and `run` its layout run (its start, in
    /// nanoseconds): the OST marks each object whose filter fid names the probing stripe
    /// (or that was never written) as accessed by that run, and the run's listing
    /// (`Objects`) passes over it, as Lustre's OST-side accessed bitmap does. `run` 0
    /// marks nothing.
    Probe {
        mdt: u32,
        run: u64,
        objs: Vec<Probe>,
    },
    /// MDT to OST.
    OstRepair(Vec<OstRepair>),
    /// MDT to OST: up to `max` objects that have data (a file), in the OST's order from
    /// `from` on (layout phase 2 looks for orphans among them), leaving out those that
    /// run `run` of MDT `mdt` found referenced in phase 1 (see `Probe`).
    Objects {
        mdt: u32,
        run: u64,
        from: ObjCursor,
        max: u32,
    },
    /// OST to MDT; `dryrun`/`orphan` as the run's `-n`/`-o`.
    Orphans {
        ost: u32,
        objs: Vec<OrphanObj>,
        flags: u16,
    },
}

/// Replies of LFSCK.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum LfsckReply {
    Started {
        active: u16,
    },
    State(Vec<ComponentState>),
    NsFacts(Vec<NsFact>),
    Outcomes(Vec<Outcome>),
    Probed(Vec<ObjState>),
    Orphans(Vec<OrphanOutcome>),
    /// A page of objects, where the next page starts (`None`: that was the last),
    /// LAST_ID of each sequence the page touched, and the highest object of each that
    /// the page passed, listed or left out as accessed (LAST_ID must cover it).
    Objects {
        objs: Vec<OrphanObj>,
        next: Option<ObjCursor>,
        last_ids: Vec<(u64, u32)>,
        highest: Vec<(u64, u32)>,
    },
}

/// A position in an OST's object listing: sequence, subdirectory (`d0`..`d31`), and the
/// object id after which to go on.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ObjCursor {
    pub seq: u64,
    pub subdir: u32,
    pub after: u32,
}

/// Items one LFSCK request carries at most (a batch of queries, repairs, probes or
/// orphans): keeps a request well under the body limit whatever the names.
pub const MAX_BATCH: usize = 1024;

impl LfsckRequest {
    /// Whether the request carries no more than [`MAX_BATCH`] items.
    pub fn within_bounds(&self) -> bool {
        match self {
            LfsckRequest::NsFacts(v) => v.len() <= MAX_BATCH,
            LfsckRequest::NsRepair(v) => v.len() <= MAX_BATCH,
            LfsckRequest::Probe { objs, .. } => objs.len() <= MAX_BATCH,
            LfsckRequest::OstRepair(v) => v.len() <= MAX_BATCH,
            LfsckRequest::Orphans { objs, .. } => objs.len() <= MAX_BATCH,
            LfsckRequest::Objects { max, .. } => *max as usize <= MAX_BATCH,
            LfsckRequest::Start(a) => a.mdts.len() <= MAX_BATCH,
            LfsckRequest::Stop { .. } | LfsckRequest::Query | LfsckRequest::Notify { .. } => true,
        }
    }
}

impl NsRepair {
    /// The object (or directory, for a name) whose MDT makes the repair.
    pub fn object(&self) -> Fid {
        match self {
            NsRepair::AddLink { fid, .. }
            | NsRepair::RemoveLink { fid, .. }
            | NsRepair::SetDirLink { fid, .. }
            | NsRepair::SetNlink { fid, .. }
            | NsRepair::CreateObject { fid, .. }
            | NsRepair::SetStripeOf { fid, .. }
            | NsRepair::Trace { fid, .. } => *fid,
            NsRepair::InsertName { parent, .. }
            | NsRepair::DeleteName { parent, .. }
            | NsRepair::SetName { parent, .. } => *parent,
            NsRepair::SetLmvSlot { master, .. } => *master,
            NsRepair::LostFound => Fid::LOST_FOUND,
        }
    }
}

/// A boxed future, as the [`LfsckService`] methods return them.
pub type BoxFuture<'a, T> = std::pin::Pin<Box<dyn std::future::Future<Output = T> + Send + 'a>>;

/// What a target hands LFSCK requests to: the checker, which lives in its own crate and is
/// attached when the target starts (the MDT and OST only know this interface).
pub trait LfsckService: Send + Sync {
    fn handle(
        self: std::sync::Arc<Self>,
        req: LfsckRequest,
    ) -> BoxFuture<'static, Result<LfsckReply, Errno>>;
    /// The target is stopping: pause what runs and save where it was.
    fn stopping(self: std::sync::Arc<Self>) -> BoxFuture<'static, ()>;
}
