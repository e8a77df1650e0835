//! The mount process's side of the control channel (see [`crate::ctl`]): resolves paths
//! with the client library and answers the tools' requests.

use crate::ctl::{self, MAX_LINE, MountEntry};
use crate::inject_ctl::{InjectOp, InjectedItem, LocalTargets};
use crate::lfsck_ctl::LocalLfsck;
use crate::params::{NodeParams, ParamValue};
use anyhow::Result;
use nacre_client::Client;
use nacre_core::lmv::LmvTemplate;
use nacre_core::{Errno, Fid, Layout, TargetName};
use nacre_lustreapi::lfsck::QueryCounts;
use nacre_rpc::lfsck::StartArgs;
use nacre_rpc::msg::{Cred, DirLayoutRequest, Dirent, InodeInfo, LayoutRequest, StatFs};
use serde::{Deserialize, Serialize};
use std::path::{Component, Path, PathBuf};
use std::sync::Arc;
use tokio::io::{AsyncBufReadExt, AsyncReadExt, AsyncWriteExt, BufReader};
use tokio::net::UnixListener;

/// What the tools ask a mount for.
#[derive(Debug, Serialize, Deserialize)]
pub enum CtlRequest {
    /// Attributes, layout and FID of a path (relative to the mount root).
    Stat {
        path: PathBuf,
    },
    /// A page of a directory's entries, at most [`LIST_PAGE`], after `cookie`.
    List {
        path: PathBuf,
        cookie: u64,
    },
    /// A page of a directory's entries with what a tree walk (`lfs find`, `getstripe -r`)
    /// needs of each, so the walk costs one call per page rather than two or three per
    /// entry, each resolving its path from the root.
    ListStat {
        path: PathBuf,
        cookie: u64,
    },
    GetDefaultLayout {
        path: PathBuf,
    },
    SetDefaultLayout {
        path: PathBuf,
        layout: Option<Layout>,
    },
    /// Creates a regular file with a layout (`lfs setstripe FILE`).
    CreateFile {
        path: PathBuf,
        layout: Layout,
        mode: u32,
        uid: u32,
        gid: u32,
    },
    Df,
    /// Every target of the mount and whether the configuration has it active (`lfs osts`).
    Targets,
    /// The OST pools of the mount's configuration (`lfs pool_list`, `lfs df --pool`).
    Pools,
    /// Pings every target and the MGS (`lfs check`).
    Check,
    /// `lctl pool_new/pool_destroy/pool_add/pool_remove`: to the MGS served here, else
    /// through the client (which the MGS refuses unless it holds the file system key).
    Pool {
        pool: String,
        op: nacre_core::pool::PoolOp,
    },
    Fid2Path {
        fid: Fid,
    },
    /// Parameters of this process matching a glob pattern (`lctl get_param`).
    GetParams {
        pattern: String,
        within: bool,
    },
    /// Sets every parameter matching `pattern` (`lctl set_param`).
    SetParam {
        pattern: String,
        value: String,
    },
    SetParamPersistent {
        name: String,
        value: Option<String>,
    },
    Info,
    /// `lfs setstripe --component-add`: components already placed after the last one.
    AddComponents {
        path: PathBuf,
        components: Vec<nacre_core::Component>,
    },
    /// `lfs setstripe --component-del`.
    DelComponents {
        path: PathBuf,
        id: Option<u32>,
        flags: u32,
        neg: u32,
    },
    /// `lfs migrate`: rewrite a file's data into `layout`, keeping its FID.
    Migrate {
        path: PathBuf,
        layout: Layout,
    },
    /// `lfs mirror resync [--only IDS]`.
    MirrorResync {
        path: PathBuf,
        only: Vec<u32>,
    },
    /// `lfs mirror verify [--only IDS] [--stale]`: with `stale`, mirrors that disagree
    /// with the rest of a chunk (or cannot be read) are marked stale there.
    MirrorVerify {
        path: PathBuf,
        only: Vec<u32>,
        stale: bool,
    },
    /// `lfs mirror read -N ID -o OUT`: the mount writes mirror `id` into file `out`.
    MirrorRead {
        path: PathBuf,
        id: u32,
        out: PathBuf,
    },
    /// `lfs mirror write -N ID -i IN`: the mount writes file `input` into mirror `id`.
    MirrorWrite {
        path: PathBuf,
        id: u32,
        input: PathBuf,
    },
    /// `lfs mirror extend`: new mirrors from a mirrored layout template, then resynced.
    MirrorExtend {
        path: PathBuf,
        components: Vec<nacre_core::Component>,
    },
    /// `lfs mirror split --mirror-id ID`: into `new_file` (created here), or destroyed.
    MirrorSplit {
        path: PathBuf,
        id: u32,
        new_file: Option<PathBuf>,
    },
    /// `lfs mkdir -i/-c/-H`: a directory with a stripe layout.
    Mkdir {
        path: PathBuf,
        layout: DirLayoutRequest,
        mode: u32,
        uid: u32,
        gid: u32,
    },
    /// `lfs setdirstripe -D` (`None`: `-d`).
    SetDefaultLmv {
        path: PathBuf,
        lmv: Option<LmvTemplate>,
    },
    GetDefaultLmv {
        path: PathBuf,
    },
    /// `lctl lfsck_start` on a device this process serves (`None`: the one it serves).
    LfsckStart {
        device: Option<String>,
        args: StartArgs,
    },
    LfsckStop {
        device: Option<String>,
        all: bool,
    },
    LfsckQuery {
        device: Option<String>,
        types: u16,
    },
    /// `nacre inject`: break `op` on `target` (`MGS`, `MDT0000`, `OST0001`), if served here.
    Inject {
        target: String,
        op: InjectOp,
    },
    /// The devices of this process (`lctl dl`).
    Devices,
}

#[derive(Debug, Serialize, Deserialize)]
pub enum CtlReply {
    Ok,
    Error {
        errno: i32,
        message: String,
    },
    Inode {
        info: InodeInfo,
        mdt: u32,
    },
    /// A page of [`CtlRequest::List`]: `cookie` resumes after it, unless `eof`.
    Entries {
        entries: Vec<Dirent>,
        cookie: u64,
        eof: bool,
    },
    /// A page of [`CtlRequest::ListStat`]: `cookie` resumes after it, unless `eof`.
    Children {
        children: Vec<Child>,
        cookie: u64,
        eof: bool,
    },
    Layout(Option<Layout>),
    Df(Vec<(TargetName, Option<StatFs>)>),
    Targets(Vec<(TargetName, bool)>),
    /// Each target's answer to a ping, and the MGS's with its device name (`lfs check`).
    Checked {
        targets: Vec<(TargetName, Result<(), Errno>)>,
        mgc: String,
        mgs: Result<(), Errno>,
    },
    /// The configuration's pools.
    Pools(Vec<nacre_core::pool::OstPool>),
    Path(String),
    Params(Vec<ParamValue>),
    /// Names of the parameters a `SetParam` changed.
    Set(Vec<String>),
    Info {
        fsname: String,
        spec: String,
        mdts: u32,
        osts: u32,
    },
    DefaultLmv(Option<LmvTemplate>),
    LfsckStarted {
        device: String,
        active: u16,
    },
    LfsckStopped {
        device: String,
    },
    LfsckQuery(QueryCounts),
    Resynced(nacre_client::mirror::ResyncOutcome),
    Verified(nacre_client::mirror::MirrorVerify),
    Injected(Vec<InjectedItem>),
    Devices(Vec<nacre_lustreapi::devices::Device>),
}

/// A directory entry as a tree walk sees it.
#[derive(Debug, Serialize, Deserialize)]
pub struct Child {
    pub name: Vec<u8>,
    pub info: InodeInfo,
    /// The MDT holding the inode.
    pub mdt: u32,
    /// A directory's default file layout.
    pub default_layout: Option<Layout>,
}

/// Entries per [`CtlRequest::ListStat`] page: bounds a reply however large the directory.
pub const LIST_STAT_PAGE: u32 = 512;
/// Entries per [`CtlRequest::List`] page: names only, so twice a [`LIST_STAT_PAGE`];
/// 1024 names of at most 255 bytes stay far under [`MAX_LINE`].
pub const LIST_PAGE: u32 = 1024;
/// Encoded bytes after which a [`CtlRequest::ListStat`] page ends early, far enough under
/// [`MAX_LINE`] for one more entry of the widest layout.
const LIST_STAT_BYTES: usize = MAX_LINE / 4;

impl CtlReply {
    pub fn err(e: Errno, message: impl Into<String>) -> CtlReply {
        CtlReply::Error {
            errno: e.code(),
            message: message.into(),
        }
    }
}

/// The control state of one mount or server process.
pub struct CtlServer {
    /// The client of a mount (`None` in a server process).
    pub client: Option<Arc<Client>>,
    pub entry: MountEntry,
    /// Parameters of this process, for `lctl`.
    pub params: Arc<NodeParams>,
    /// Checkers of the targets this process serves.
    pub lfsck: LocalLfsck,
    /// The targets this process serves, for `nacre inject`.
    pub targets: LocalTargets,
}

/// Walks `rel` from the root, one lookup per component.
pub async fn resolve(client: &Client, rel: &Path) -> Result<InodeInfo, Errno> {
    let mut cur = client.getattr(Fid::ROOT).await?;
    for comp in rel.components() {
        match comp {
            Component::Normal(name) => {
                use std::os::unix::ffi::OsStrExt;
                cur = client
                    .lookup(cur.attr.fid, name.as_bytes(), &Cred::root())
                    .await?;
            }
            Component::CurDir | Component::RootDir => {}
            Component::ParentDir | Component::Prefix(_) => return Err(Errno::EINVAL),
        }
    }
    Ok(cur)
}

/// Who a file or directory made through the control socket belongs to: the mount's
/// control socket is root's, so requests through it act as root, except that new entries
/// belong to the `uid`:`gid` asked for (with root's rights while made).
fn ctl_cred(uid: u32, gid: u32) -> Cred {
    Cred::user(uid, gid, Vec::new(), nacre_rpc::msg::cap::ALL)
}

/// The first of `ids` that no component of `f` belongs to, as Lustre's `lfs mirror` looks
/// before it acts.
fn missing_mirror(f: &InodeInfo, ids: &[u32]) -> Option<u32> {
    let have = f
        .layout
        .as_ref()
        .map(|l| l.mirror_ids())
        .unwrap_or_default();
    ids.iter().copied().find(|id| !have.contains(id))
}

/// Whether a failed `lfs mirror split` was the MDT's refusal, made before anything moved,
/// rather than an error that may have come after the split (a lost reply).
fn split_refused(e: Errno) -> bool {
    [Errno::EINVAL, Errno::EBUSY, Errno::EPERM, Errno::EACCES].contains(&e)
}

/// `lfs mirror read` and `write` of a mirror the file does not have, in Lustre's words.
fn no_such_mirror(id: u32) -> CtlReply {
    CtlReply::err(Errno::EINVAL, format!("cannot find mirror with ID {id}"))
}

/// The directory that would hold `rel`, and the name `rel` has in it.
async fn resolve_parent<'a>(
    client: &Client,
    rel: &'a Path,
) -> Result<(InodeInfo, &'a [u8]), Errno> {
    use std::os::unix::ffi::OsStrExt;
    let name = rel.file_name().ok_or(Errno::EINVAL)?;
    let parent = resolve(client, rel.parent().unwrap_or(Path::new(""))).await?;
    Ok((parent, name.as_bytes()))
}

impl CtlServer {
    async fn handle(&self, req: CtlRequest) -> CtlReply {
        let req = match self.handle_server(req).await {
            Ok(reply) => return reply,
            Err(req) => req,
        };
        match self.handle_inner(req).await {
            Ok(r) => r,
            Err(e) => CtlReply::err(e, e.describe()),
        }
    }

    /// Requests any process answers, client or not; others come back.
    async fn handle_server(&self, req: CtlRequest) -> Result<CtlReply, CtlRequest> {
        Ok(match req {
            CtlRequest::GetParams { pattern, within } => {
                CtlReply::Params(self.params.list_matching(&pattern, within))
            }
            CtlRequest::SetParam { pattern, value } => {
                match self.params.set_matching(&pattern, &value) {
                    Ok(names) => CtlReply::Set(names),
                    Err(m) => CtlReply::err(Errno::EINVAL, m),
                }
            }
            CtlRequest::LfsckStart { device, args } => {
                match self.lfsck.start(device.as_deref(), args).await {
                    Ok((device, active)) => CtlReply::LfsckStarted { device, active },
                    Err((e, m)) => CtlReply::err(e, m),
                }
            }
            CtlRequest::LfsckStop { device, all } => {
                match self.lfsck.stop(device.as_deref(), all).await {
                    Ok(device) => CtlReply::LfsckStopped { device },
                    Err((e, m)) => CtlReply::err(e, m),
                }
            }
            CtlRequest::LfsckQuery { device, types } => {
                match self.lfsck.query(device.as_deref(), types).await {
                    Ok(q) => CtlReply::LfsckQuery(q),
                    Err((e, m)) => CtlReply::err(e, m),
                }
            }
            // As Lustre's `lctl set_param -P`, for the MGS's node: the MGS served here
            // keeps it; elsewhere the request goes through the client, which the MGS
            // refuses unless it holds the file system key.
            CtlRequest::SetParamPersistent { name, value } => match &self.targets.mgs {
                Some((mgs, _)) => match mgs.set_param(&name, value.as_deref()) {
                    Ok(()) => CtlReply::Ok,
                    Err(e) => CtlReply::err(e, e.describe()),
                },
                None => return Err(CtlRequest::SetParamPersistent { name, value }),
            },
            CtlRequest::Devices => {
                let mut devs = match &self.targets.mgs {
                    Some((mgs, _)) => crate::params::mgs_devices(mgs),
                    None => Vec::new(),
                };
                devs.extend(self.params.devices());
                CtlReply::Devices(devs)
            }
            // A process without a client answers with its MGS's configuration.
            CtlRequest::Pools if self.client.is_none() => match &self.targets.mgs {
                Some((mgs, _)) => CtlReply::Pools(mgs.config().pools),
                None => return Err(CtlRequest::Pools),
            },
            CtlRequest::Pool { pool, op } => match &self.targets.mgs {
                Some((mgs, _)) => match mgs.pool(&pool, &op) {
                    Ok(()) => CtlReply::Ok,
                    Err(e) => CtlReply::err(e, e.describe()),
                },
                None => return Err(CtlRequest::Pool { pool, op }),
            },
            CtlRequest::Inject { target, op } => {
                tracing::warn!("inject on {target}: {op:?}");
                match self.targets.inject(&target, op).await {
                    Ok(items) => CtlReply::Injected(items),
                    Err((e, m)) => CtlReply::err(e, m),
                }
            }
            other => return Err(other),
        })
    }

    async fn handle_inner(&self, req: CtlRequest) -> Result<CtlReply, Errno> {
        // What is left needs a client: a server process has none.
        let Some(c) = &self.client else {
            return Ok(CtlReply::err(
                Errno::ENOTCONN,
                "this process serves targets and has no client mount",
            ));
        };
        Ok(match req {
            CtlRequest::Stat { path } => {
                let info = resolve(c, &path).await?;
                let mdt = c.mdt_of(&info.attr.fid);
                CtlReply::Inode { info, mdt }
            }
            CtlRequest::List { path, cookie } => {
                let dir = resolve(c, &path).await?;
                let (entries, eof) = c
                    .readdir(dir.attr.fid, cookie, LIST_PAGE, &Cred::root())
                    .await?;
                let cookie = entries.last().map_or(cookie, |e| e.cookie);
                CtlReply::Entries {
                    entries,
                    cookie,
                    eof,
                }
            }
            CtlRequest::ListStat { path, cookie } => {
                let dir = resolve(c, &path).await?;
                let (ents, mut eof) = c
                    .readdir(dir.attr.fid, cookie, LIST_STAT_PAGE, &Cred::root())
                    .await?;
                let mut next = ents.last().map_or(cookie, |e| e.cookie);
                let mut children = Vec::with_capacity(ents.len());
                let (mut bytes, mut last_cookie) = (0usize, cookie);
                for e in ents {
                    // Wide layouts make large entries: the page ends early rather than
                    // outgrow a control line, between entries whose cookies differ (the
                    // next page starts after a cookie).
                    if bytes > LIST_STAT_BYTES && e.cookie != last_cookie {
                        next = last_cookie;
                        eof = false;
                        break;
                    }
                    last_cookie = e.cookie;
                    let info = match c.getattr(e.fid).await {
                        Ok(i) => i,
                        // Removed since the readdir: not part of the walk.
                        Err(Errno::ENOENT) => continue,
                        Err(err) => return Err(err),
                    };
                    let default_layout = if info.attr.is_dir() {
                        match c.get_default_layout(info.attr.fid).await {
                            Ok(l) => l,
                            Err(Errno::ENOENT) => continue,
                            Err(err) => return Err(err),
                        }
                    } else {
                        None
                    };
                    let child = Child {
                        name: e.name,
                        mdt: c.mdt_of(&info.attr.fid),
                        info,
                        default_layout,
                    };
                    bytes += serde_json::to_vec(&child).map_or(0, |v| v.len());
                    children.push(child);
                }
                CtlReply::Children {
                    children,
                    cookie: next,
                    eof,
                }
            }
            CtlRequest::GetDefaultLayout { path } => {
                let dir = resolve(c, &path).await?;
                CtlReply::Layout(c.get_default_layout(dir.attr.fid).await?)
            }
            CtlRequest::SetDefaultLayout { path, layout } => {
                let dir = resolve(c, &path).await?;
                if !dir.attr.is_dir() {
                    return Err(Errno::ENOTDIR);
                }
                c.set_default_layout(dir.attr.fid, layout, &Cred::root())
                    .await?;
                CtlReply::Ok
            }
            CtlRequest::CreateFile {
                path,
                layout,
                mode,
                uid,
                gid,
            } => {
                let (p, name) = resolve_parent(c, &path).await?;
                let cred = ctl_cred(uid, gid);
                let (info, _) = c
                    .create(
                        p.attr.fid,
                        name,
                        libc::S_IFREG | (mode & 0o7777),
                        0,
                        &cred,
                        None,
                        LayoutRequest::Explicit(layout),
                        None,
                        true,
                    )
                    .await?;
                let mdt = c.mdt_of(&info.attr.fid);
                CtlReply::Inode { info, mdt }
            }
            CtlRequest::Df => {
                let st = c.target_statfs().await;
                CtlReply::Df(st.into_iter().map(|(t, r)| (t, r.ok())).collect())
            }
            CtlRequest::Targets => CtlReply::Targets(c.target_states()),
            CtlRequest::Check => {
                let bound = nacre_client::md::TARGET_CHECK_BOUND;
                let (targets, mgs) = tokio::join!(c.check_targets(bound), c.check_mgs(bound));
                CtlReply::Checked {
                    targets,
                    mgc: c.mgc().device_name(),
                    mgs,
                }
            }
            CtlRequest::Pools => CtlReply::Pools(c.config().pools),
            CtlRequest::Pool { pool, op } => match c.pool(&pool, op).await {
                Ok(()) => CtlReply::Ok,
                Err(Errno::EPERM) => CtlReply::err(
                    Errno::EPERM,
                    "pool commands are for the MGS's node: this client holds the client key, \
                     which the MGS refuses them to (run it where the MGS is served, or mount \
                     with the file system key)",
                ),
                Err(e) => CtlReply::err(e, e.describe()),
            },
            CtlRequest::Fid2Path { fid } => {
                let p = c.fid2path(fid).await?;
                CtlReply::Path(String::from_utf8_lossy(&p).into_owned())
            }
            CtlRequest::SetParamPersistent { name, value } => {
                match c.set_param_persistent(&name, value.as_deref()).await {
                    Ok(()) => CtlReply::Ok,
                    Err(Errno::EPERM) => CtlReply::err(
                        Errno::EPERM,
                        "set_param -P is for the MGS's node: this client holds the client key, \
                         which the MGS refuses it to (run it where the MGS is served, or mount \
                         with the file system key)",
                    ),
                    Err(e) => return Err(e),
                }
            }
            CtlRequest::AddComponents { path, components } => {
                let f = resolve(c, &path).await?;
                let info = c
                    .add_components(f.attr.fid, components, &Cred::root())
                    .await?;
                let mdt = c.mdt_of(&info.attr.fid);
                CtlReply::Inode { info, mdt }
            }
            CtlRequest::DelComponents {
                path,
                id,
                flags,
                neg,
            } => {
                let f = resolve(c, &path).await?;
                let info = c
                    .del_components(f.attr.fid, id, flags, neg, &Cred::root())
                    .await?;
                let mdt = c.mdt_of(&info.attr.fid);
                CtlReply::Inode { info, mdt }
            }
            CtlRequest::Migrate { path, layout } => {
                let f = resolve(c, &path).await?;
                let info = c.migrate(f.attr.fid, layout, &Cred::root()).await?;
                let mdt = c.mdt_of(&info.attr.fid);
                CtlReply::Inode { info, mdt }
            }
            CtlRequest::MirrorResync { path, only } => {
                let f = resolve(c, &path).await?;
                if let Some(id) = missing_mirror(&f, &only) {
                    return Ok(CtlReply::err(
                        Errno::EINVAL,
                        format!("invalid specified mirror id: {id}"),
                    ));
                }
                CtlReply::Resynced(c.mirror_resync(f.attr.fid, &only).await?)
            }
            CtlRequest::MirrorVerify { path, only, stale } => {
                let f = resolve(c, &path).await?;
                if let Some(id) = missing_mirror(&f, &only) {
                    return Ok(CtlReply::err(
                        Errno::EINVAL,
                        format!("invalid specified mirror id: {id}"),
                    ));
                }
                let v = c.mirror_verify(f.attr.fid, &only).await?;
                if stale {
                    c.mark_disagreeing_stale(f.attr.fid, &v).await?;
                }
                CtlReply::Verified(v)
            }
            CtlRequest::MirrorRead { path, id, out } => {
                let f = resolve(c, &path).await?;
                if missing_mirror(&f, &[id]).is_some() {
                    return Ok(no_such_mirror(id));
                }
                mirror_read_to(c, f.attr.fid, id, &out).await?;
                CtlReply::Ok
            }
            CtlRequest::MirrorWrite { path, id, input } => {
                let f = resolve(c, &path).await?;
                if missing_mirror(&f, &[id]).is_some() {
                    return Ok(no_such_mirror(id));
                }
                mirror_write_from(c, f.attr.fid, id, &input).await?;
                CtlReply::Ok
            }
            CtlRequest::MirrorExtend { path, components } => {
                let f = resolve(c, &path).await?;
                // The merged layout checked first, as Lustre's lfs does
                // (`llapi_layout_sanity`): the MDT refuses it too, with an errno alone.
                if let Some(mut merged) = f.layout.clone() {
                    merged.add_mirrors(components.clone(), |_, _| {});
                    if let Err(e) = nacre_core::layout_rules::check_structure(&merged) {
                        return Ok(CtlReply::err(e.errno(), format!("Invalid layout: {e}")));
                    }
                }
                let info = c.mirror_extend(f.attr.fid, components).await?;
                let mdt = c.mdt_of(&info.attr.fid);
                CtlReply::Inode { info, mdt }
            }
            CtlRequest::MirrorSplit { path, id, new_file } => {
                let f = resolve(c, &path).await?;
                // A mirror the file does not have is refused before the new file is
                // made, as Lustre's lfs looks first: a failed split leaves nothing behind.
                if missing_mirror(&f, &[id]).is_some() {
                    return Ok(CtlReply::err(
                        Errno::EINVAL,
                        format!("does not contain mirror with id {id}"),
                    ));
                }
                let victim = match &new_file {
                    Some(nf) => {
                        let (p, name) = resolve_parent(c, nf).await?;
                        let (info, _) = c
                            .create(
                                p.attr.fid,
                                name,
                                f.attr.mode,
                                0,
                                &Cred::root(),
                                None,
                                LayoutRequest::Inherit,
                                None,
                                true,
                            )
                            .await?;
                        Some((p.attr.fid, name, info.attr.fid))
                    }
                    None => None,
                };
                match c.mirror_split(f.attr.fid, id, victim.map(|v| v.2)).await {
                    Ok(info) => {
                        let mdt = c.mdt_of(&info.attr.fid);
                        CtlReply::Inode { info, mdt }
                    }
                    Err(e) => {
                        // The MDT refused (the last mirror in sync, a file open for
                        // writing): nothing moved, and the file made for the mirror goes
                        // again. After any other error the split may have been made (a
                        // lost reply, the new file's size not set), so the file, which may
                        // hold the mirror, stays.
                        if let Some((parent, name, _)) = victim {
                            let shown = String::from_utf8_lossy(name);
                            if split_refused(e) {
                                if let Err(u) = c.unlink(parent, name, &Cred::root()).await {
                                    tracing::warn!(
                                        "lfs mirror split: {shown}: the split was refused \
                                         ({e}) and the new file could not be removed: {u}"
                                    );
                                }
                            } else {
                                tracing::warn!(
                                    "lfs mirror split: {shown}: the split failed ({e}); the \
                                     new file is kept, as it may hold the mirror"
                                );
                            }
                        }
                        return Err(e);
                    }
                }
            }
            CtlRequest::Mkdir {
                path,
                layout,
                mode,
                uid,
                gid,
            } => {
                let (p, name) = resolve_parent(c, &path).await?;
                let cred = ctl_cred(uid, gid);
                let info = c
                    .mkdir_with_layout(p.attr.fid, name, mode, &cred, layout)
                    .await?;
                let mdt = c.mdt_of(&info.attr.fid);
                CtlReply::Inode { info, mdt }
            }
            CtlRequest::SetDefaultLmv { path, lmv } => {
                let dir = resolve(c, &path).await?;
                if !dir.attr.is_dir() {
                    return Err(Errno::ENOTDIR);
                }
                c.set_default_lmv(dir.attr.fid, lmv, &Cred::root()).await?;
                CtlReply::Ok
            }
            CtlRequest::GetDefaultLmv { path } => {
                let dir = resolve(c, &path).await?;
                if !dir.attr.is_dir() {
                    return Err(Errno::ENOTDIR);
                }
                CtlReply::DefaultLmv(c.get_default_lmv(dir.attr.fid).await?)
            }
            CtlRequest::Info => CtlReply::Info {
                fsname: c.fsname.clone(),
                spec: self.entry.spec.clone(),
                mdts: c.mdt_count() as u32,
                osts: c.ost_count() as u32,
            },
            CtlRequest::GetParams { .. }
            | CtlRequest::SetParam { .. }
            | CtlRequest::LfsckStart { .. }
            | CtlRequest::LfsckStop { .. }
            | CtlRequest::LfsckQuery { .. }
            | CtlRequest::Inject { .. }
            | CtlRequest::Devices => return Err(Errno::EPROTO),
        })
    }

    /// Serves the socket until the listener fails or the task is dropped.
    pub async fn run(self: Arc<Self>, listener: UnixListener) {
        loop {
            let Ok((stream, _)) = listener.accept().await else {
                return;
            };
            let me = self.clone();
            tokio::spawn(async move {
                let (rd, mut wr) = stream.into_split();
                let mut rd = BufReader::new(rd.take(MAX_LINE as u64));
                let mut line = Vec::new();
                while let Ok(n) = rd.read_until(b'\n', &mut line).await {
                    if n == 0 {
                        break;
                    }
                    let reply = match serde_json::from_slice::<CtlRequest>(&line) {
                        Ok(req) => me.handle(req).await,
                        Err(e) => CtlReply::err(Errno::EINVAL, format!("malformed request: {e}")),
                    };
                    let mut out = match serde_json::to_vec(&reply) {
                        Ok(out) => out,
                        Err(e) => {
                            let m = format!("cannot encode the reply: {e}");
                            tracing::error!("{m}");
                            match serde_json::to_vec(&CtlReply::err(Errno::EIO, m)) {
                                Ok(out) => out,
                                Err(_) => break,
                            }
                        }
                    };
                    out.push(b'\n');
                    if wr.write_all(&out).await.is_err() {
                        break;
                    }
                    line.clear();
                }
            });
        }
    }
}

/// Binds the control socket of a mount (owner-only) and registers the mount.
pub fn bind(entry: &MountEntry) -> Result<UnixListener> {
    let l = bind_socket(entry)?;
    ctl::register(entry)?;
    Ok(l)
}

/// Binds the control socket of a server process (owner-only) and registers it.
pub fn bind_server(entry: &MountEntry) -> Result<UnixListener> {
    let l = bind_socket(entry)?;
    ctl::register_server(entry)?;
    Ok(l)
}

fn bind_socket(entry: &MountEntry) -> Result<UnixListener> {
    use std::os::unix::fs::PermissionsExt;
    let _ = std::fs::remove_file(&entry.socket);
    let l = UnixListener::bind(&entry.socket)?;
    std::fs::set_permissions(&entry.socket, std::fs::Permissions::from_mode(0o600))?;
    Ok(l)
}

/// Bytes per step of `lfs mirror read` and `write`.
const MIRROR_IO_STEP: u64 = nacre_client::mirror::RESYNC_CHUNK;

/// Writes mirror `id` of `fid` (its in-sync size) into the file `out`.
async fn mirror_read_to(c: &Client, fid: Fid, id: u32, out: &Path) -> Result<(), Errno> {
    let size = c.getattr(fid).await?.attr.size;
    let mut f = tokio::fs::File::create(out).await.map_err(io_errno)?;
    let mut pos = 0;
    while pos < size {
        let n = (size - pos).min(MIRROR_IO_STEP);
        let (data, _) = c.mirror_read(fid, id, pos, n).await?;
        f.write_all(&data).await.map_err(io_errno)?;
        pos += n;
    }
    f.flush().await.map_err(io_errno)
}

/// Writes the file `input` into mirror `id` of `fid` from offset 0.
async fn mirror_write_from(c: &Client, fid: Fid, id: u32, input: &Path) -> Result<(), Errno> {
    let mut f = tokio::fs::File::open(input).await.map_err(io_errno)?;
    let mut pos = 0u64;
    loop {
        let mut buf = vec![0u8; MIRROR_IO_STEP as usize];
        let mut got = 0;
        while got < buf.len() {
            let n = f.read(&mut buf[got..]).await.map_err(io_errno)?;
            if n == 0 {
                break;
            }
            got += n;
        }
        if got == 0 {
            return Ok(());
        }
        buf.truncate(got);
        c.mirror_write(fid, id, pos, bytes::Bytes::from(buf))
            .await?;
        pos += got as u64;
    }
}

fn io_errno(e: std::io::Error) -> Errno {
    Errno(e.raw_os_error().unwrap_or(libc::EIO))
}
