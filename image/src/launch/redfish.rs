//! Redfish (DMTF DSP0266) virtual media launch: find the system and a CD/DVD virtual media
//! device, eject what is inserted, insert the ISO, set a one-time boot override to `Cd`,
//! reset, then read back what the BMC kept.
//!
//! What to send is decided by pure functions over the BMC's JSON (tested on fixtures in
//! `image/tests/fixtures/redfish/`); [`Bmc`] (`bmc.rs`) only moves requests. Known differences:
//! - AMI MegaRAC (Ampere Mt. Jade) wants `If-Match` with the resource's ETag on PATCH and
//!   may name a settings resource (`@Redfish.Settings.SettingsObject`, `…/SD`) that takes
//!   the PATCH instead of the system: [`boot_patch_target`], ETag sent whenever the BMC
//!   gives one.
//! - OpenBMC accepts only https (or smb) image URLs: [`check_image_url`].

use std::time::{Duration, Instant};

use anyhow::{bail, Context, Result};
use serde_json::{json, Value};

use super::bmc::{Bmc, Fetched};

/// The `@odata.id` of a JSON object, or of the link object under `key`.
pub(crate) fn odata_id(v: &Value) -> Option<&str> {
    v.get("@odata.id").and_then(Value::as_str)
}

fn link<'a>(v: &'a Value, key: &str) -> Option<&'a str> {
    v.get(key).and_then(odata_id)
}

/// The `@odata.id` of every member of a collection.
pub(crate) fn members(collection: &Value) -> Vec<String> {
    collection
        .get("Members")
        .and_then(Value::as_array)
        .map(|m| m.iter().filter_map(odata_id).map(str::to_string).collect())
        .unwrap_or_default()
}

/// The system to launch: the member whose id (last path segment) is `wanted`, or the only
/// member when none is named.
pub(crate) fn pick_system(collection: &Value, wanted: Option<&str>) -> Result<String> {
    let all = members(collection);
    match wanted {
        Some(id) => all
            .iter()
            .find(|m| m.trim_end_matches('/').rsplit('/').next() == Some(id))
            .cloned()
            .with_context(|| {
                format!(
                    "the BMC has no system \"{id}\" (it has: {})",
                    all.join(", ")
                )
            }),
        None => match all.as_slice() {
            [one] => Ok(one.clone()),
            [] => bail!("the BMC lists no systems under /redfish/v1/Systems"),
            _ => bail!(
                "the BMC has {} systems ({}): name one with --system ID",
                all.len(),
                all.join(", ")
            ),
        },
    }
}

/// Where the virtual media collections are, in the order to try: the system's own link
/// first, then each manager's that manages it.
pub(crate) fn media_collections(system: &Value, managers: &[Value]) -> Vec<String> {
    let mut out: Vec<String> = link(system, "VirtualMedia")
        .map(str::to_string)
        .into_iter()
        .collect();
    out.extend(
        managers
            .iter()
            .filter_map(|m| link(m, "VirtualMedia"))
            .map(str::to_string),
    );
    out
}

/// The managers of a system (`Links.ManagedBy`).
pub(crate) fn managed_by(system: &Value) -> Vec<String> {
    system
        .pointer("/Links/ManagedBy")
        .and_then(Value::as_array)
        .map(|m| m.iter().filter_map(odata_id).map(str::to_string).collect())
        .unwrap_or_default()
}

/// Whether a virtual media device takes a CD or DVD image.
pub(crate) fn is_optical(media: &Value) -> bool {
    media
        .get("MediaTypes")
        .and_then(Value::as_array)
        .is_some_and(|t| t.iter().any(|x| matches!(x.as_str(), Some("CD" | "DVD"))))
}

/// Whether something is in the device now.
pub(crate) fn is_inserted(media: &Value) -> bool {
    media.get("Inserted").and_then(Value::as_bool) == Some(true)
        || media
            .get("Image")
            .and_then(Value::as_str)
            .is_some_and(|s| !s.is_empty())
}

/// An action's target and its ActionInfo link, from a resource's `Actions`.
pub(crate) fn action<'a>(resource: &'a Value, name: &str) -> Option<(&'a str, Option<&'a str>)> {
    let a = resource.get("Actions")?.get(format!("#{name}"))?;
    let target = a.get("target")?.as_str()?;
    Some((target, a.get("@Redfish.ActionInfo").and_then(Value::as_str)))
}

/// The allowable values of an action parameter: inline (`Name@Redfish.AllowableValues`) or
/// from the ActionInfo resource's `Parameters`.
pub(crate) fn allowable_values(
    resource_action: &Value,
    action_info: Option<&Value>,
    parameter: &str,
) -> Option<Vec<String>> {
    let strings = |v: &Value| -> Vec<String> {
        v.as_array()
            .map(|a| {
                a.iter()
                    .filter_map(Value::as_str)
                    .map(str::to_string)
                    .collect()
            })
            .unwrap_or_default()
    };
    if let Some(v) = resource_action.get(format!("{parameter}@Redfish.AllowableValues")) {
        return Some(strings(v));
    }
    action_info?
        .get("Parameters")?
        .as_array()?
        .iter()
        .find(|p| p.get("Name").and_then(Value::as_str) == Some(parameter))
        .and_then(|p| p.get("AllowableValues"))
        .map(strings)
}

/// Which BMC firmware this is, from the service root and manager (for known differences).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Firmware {
    OpenBmc,
    Ami,
    Other,
}

pub(crate) fn firmware(root: &Value, manager: Option<&Value>) -> Firmware {
    let lower = |v: Option<&Value>, key: &str| {
        v.and_then(|v| v.get(key))
            .and_then(Value::as_str)
            .unwrap_or("")
            .to_ascii_lowercase()
    };
    let oem_keys = |v: Option<&Value>| -> Vec<String> {
        v.and_then(|v| v.get("Oem"))
            .and_then(Value::as_object)
            .map(|o| o.keys().map(|k| k.to_ascii_lowercase()).collect())
            .unwrap_or_default()
    };
    let vendor = lower(Some(root), "Vendor");
    let oem: Vec<String> = oem_keys(Some(root))
        .into_iter()
        .chain(oem_keys(manager))
        .collect();
    // AMI's OpenBMC-based firmware names itself OpenBmc in its Oem sections and has
    // bmcweb's URL rules, so OpenBMC is recognised first.
    if vendor.contains("openbmc") || oem.iter().any(|k| k == "openbmc") {
        Firmware::OpenBmc
    } else if vendor == "ami"
        || oem.iter().any(|k| k == "ami")
        || lower(manager, "Model").contains("megarac")
    {
        Firmware::Ami
    } else {
        Firmware::Other
    }
}

/// Refuses an image URL the BMC cannot fetch by its scheme.
pub(crate) fn check_image_url(url: &str, fw: Firmware) -> Result<()> {
    let scheme = url.split_once("://").map(|(s, _)| s.to_ascii_lowercase());
    match (scheme.as_deref(), fw) {
        (Some("https" | "smb"), Firmware::OpenBmc) => Ok(()),
        (Some(s), Firmware::OpenBmc) => bail!(
            "OpenBMC mounts only https or smb image URLs, not {s}: serve the ISO over https (e.g. a presigned URL of an https object store)"
        ),
        (Some("http" | "https"), _) => Ok(()),
        _ => bail!("the ISO URL \"{url}\" is not an http(s) URL the BMC can fetch"),
    }
}

/// The `TransferProtocolType` to send: the URL's scheme when the BMC lists allowable
/// values (and it is among them), nothing when it lists none.
pub(crate) fn transfer_protocol(url: &str, allowed: Option<&[String]>) -> Result<Option<String>> {
    let Some(allowed) = allowed else {
        return Ok(None);
    };
    let scheme = url
        .split_once("://")
        .map(|(s, _)| s.to_ascii_uppercase())
        .unwrap_or_default();
    let want = match scheme.as_str() {
        "HTTPS" => "HTTPS",
        "HTTP" => "HTTP",
        "SMB" => "CIFS",
        other => other,
    };
    if allowed.iter().any(|a| a == want) {
        Ok(Some(want.to_string()))
    } else {
        bail!(
            "the BMC's InsertMedia takes TransferProtocolType {} but not {want} (the ISO URL's scheme)",
            allowed.join(", ")
        )
    }
}

/// The InsertMedia request body.
pub(crate) fn insert_body(url: &str, protocol: Option<&str>) -> Value {
    let mut b = json!({"Image": url, "Inserted": true, "WriteProtected": true});
    if let Some(p) = protocol {
        b["TransferProtocolType"] = json!(p);
    }
    b
}

/// Where the boot override is PATCHed: the settings resource the system names
/// (`@Redfish.Settings.SettingsObject`, AMI's `/SD`), else the system itself.
pub(crate) fn boot_patch_target(system_path: &str, system: &Value) -> String {
    system
        .pointer("/@Redfish.Settings/SettingsObject/@odata.id")
        .and_then(Value::as_str)
        .unwrap_or(system_path)
        .to_string()
}

/// The boot override PATCH body: Cd, Once, and UEFI when the system has a boot mode.
pub(crate) fn boot_body(system: &Value) -> Value {
    let mut boot = json!({"BootSourceOverrideTarget": "Cd", "BootSourceOverrideEnabled": "Once"});
    if system.pointer("/Boot/BootSourceOverrideMode").is_some() {
        boot["BootSourceOverrideMode"] = json!("UEFI");
    }
    json!({ "Boot": boot })
}

/// The reset to ask for: `ForceRestart` when on (`PowerCycle` if that is all the BMC
/// allows), `On` when off.
pub(crate) fn reset_type(system: &Value) -> Result<&'static str> {
    let on = system.get("PowerState").and_then(Value::as_str) == Some("On");
    let allowed: Option<Vec<String>> = system
        .pointer("/Actions/#ComputerSystem.Reset/ResetType@Redfish.AllowableValues")
        .and_then(Value::as_array)
        .map(|a| {
            a.iter()
                .filter_map(Value::as_str)
                .map(str::to_string)
                .collect()
        });
    let candidates: &[&'static str] = if on {
        &["ForceRestart", "PowerCycle"]
    } else {
        &["On", "ForceOn"]
    };
    match allowed {
        None => Ok(candidates[0]),
        Some(a) => candidates
            .iter()
            .find(|c| a.iter().any(|x| x == *c))
            .copied()
            .with_context(|| {
                format!(
                    "the BMC allows ResetType {} but none of {}",
                    a.join(", "),
                    candidates.join(", ")
                )
            }),
    }
}

/// What the BMC answered 200/204 to but does not show when read back (empty: all kept).
pub(crate) fn not_kept(sent: &Value, read: &Value) -> Vec<String> {
    let mut out = Vec::new();
    compare("", sent, read, &mut out);
    out
}

fn compare(path: &str, sent: &Value, read: &Value, out: &mut Vec<String>) {
    match sent {
        Value::Object(map) => {
            for (k, v) in map {
                let p = format!("{path}/{k}");
                match read.get(k) {
                    Some(r) => compare(&p, v, r, out),
                    None => out.push(format!("{} was set to {v} but is not shown", &p[1..])),
                }
            }
        }
        _ if sent != read => out.push(format!(
            "{} was set to {sent} but reads {read}",
            path.trim_start_matches('/')
        )),
        _ => {}
    }
}

/// A Redfish error body's messages, for errors.
pub(crate) fn error_messages(body: &str) -> String {
    let Ok(v) = serde_json::from_str::<Value>(body) else {
        return body.chars().take(300).collect();
    };
    let mut msgs: Vec<String> = Vec::new();
    if let Some(e) = v.get("error") {
        if let Some(m) = e.get("message").and_then(Value::as_str) {
            msgs.push(m.to_string());
        }
        if let Some(a) = e.get("@Message.ExtendedInfo").and_then(Value::as_array) {
            msgs.extend(
                a.iter()
                    .filter_map(|i| i.get("Message").and_then(Value::as_str))
                    .map(str::to_string),
            );
        }
    }
    if msgs.is_empty() {
        body.chars().take(300).collect()
    } else {
        msgs.join("; ")
    }
}

/// How a task (202 Accepted) ended, from its Task resource; None while it runs.
pub(crate) fn task_outcome(task: &Value) -> Option<Result<(), String>> {
    let state = task.get("TaskState").and_then(Value::as_str)?;
    match state {
        "New" | "Starting" | "Running" | "Pending" | "Stopping" | "Suspended" | "Service" => None,
        "Completed" if task.get("TaskStatus").and_then(Value::as_str) != Some("Critical") => {
            Some(Ok(()))
        }
        other => {
            let msgs: Vec<&str> = task
                .get("Messages")
                .and_then(Value::as_array)
                .map(|a| {
                    a.iter()
                        .filter_map(|m| m.get("Message").and_then(Value::as_str))
                        .collect()
                })
                .unwrap_or_default();
            Some(Err(format!("task ended {other}: {}", msgs.join("; "))))
        }
    }
}

/// The ComputerSystem's `UUID`, when it reports one.
pub(crate) fn system_uuid(system: &Value) -> Option<String> {
    system
        .get("UUID")
        .and_then(Value::as_str)
        .map(str::trim)
        .filter(|u| !u.is_empty())
        .map(str::to_string)
}

/// What a Redfish launch did, for the launch record and the summary.
#[derive(Debug, Clone, serde::Serialize, serde::Deserialize)]
pub(crate) struct RedfishLaunch {
    pub(crate) bmc: String,
    pub(crate) system: String,
    /// The ComputerSystem's `UUID`: the appliance reports the same (DMI product_uuid) in
    /// its status object, which is how `wait` recognises this server.
    #[serde(default)]
    pub(crate) system_uuid: Option<String>,
    pub(crate) virtual_media: String,
    /// What was inserted before (without its query: a presigned URL's signature).
    pub(crate) ejected: Option<String>,
    pub(crate) boot_patched: String,
    pub(crate) reset: String,
    /// What the BMC answered 200/204 to but did not keep.
    pub(crate) not_kept: Vec<String>,
    pub(crate) power_state: Option<String>,
}

/// The system and its CD/DVD virtual media device.
pub(crate) struct Found {
    pub(crate) fw: Firmware,
    pub(crate) system_path: String,
    pub(crate) system: Fetched,
    pub(crate) media_path: String,
    pub(crate) media: Value,
}

pub(crate) async fn find(bmc: &Bmc, system_id: Option<&str>) -> Result<Found> {
    let root = bmc.get("/redfish/v1/").await?.body;
    let systems_path = link(&root, "Systems")
        .unwrap_or("/redfish/v1/Systems")
        .to_string();
    let systems = bmc.get(&systems_path).await?.body;
    let system_path = pick_system(&systems, system_id)?;
    let system = bmc.get(&system_path).await?;
    let mut managers = Vec::new();
    for m in managed_by(&system.body) {
        managers.push(bmc.get(&m).await?.body);
    }
    let fw = firmware(&root, managers.first());
    for collection in media_collections(&system.body, &managers) {
        let c = bmc.get(&collection).await?.body;
        for m in members(&c) {
            let media = bmc.get(&m).await?.body;
            if is_optical(&media) {
                return Ok(Found {
                    fw,
                    system_path,
                    system,
                    media_path: m,
                    media,
                });
            }
        }
    }
    bail!(
        "the BMC offers no virtual media device for CD or DVD on {system_path}: use --ipmi with the ISO mounted by hand"
    )
}

/// Runs the whole launch on one BMC; `say` gets one line per step.
pub(crate) async fn launch(
    bmc: &Bmc,
    system_id: Option<&str>,
    image_url: &str,
    power_wait: Duration,
    say: &mut dyn FnMut(String),
) -> Result<RedfishLaunch> {
    let Found {
        fw,
        system_path,
        system,
        media_path,
        media,
    } = find(bmc, system_id).await?;
    check_image_url(image_url, fw)?;
    say(format!("system {system_path} ({fw:?} firmware)"));
    say(format!("virtual media {media_path}"));

    let mut ejected = None;
    if is_inserted(&media) {
        let was = media
            .get("Image")
            .and_then(Value::as_str)
            .unwrap_or("")
            .to_string();
        let (eject, _) = action(&media, "VirtualMedia.EjectMedia")
            .with_context(|| format!("{media_path} has media inserted but no EjectMedia action"))?;
        bmc.post_action(eject, &json!({})).await?;
        let was = super::record::without_query(&was);
        say(format!("ejected {was}"));
        ejected = Some(was);
    }

    let (insert, info_link) = action(&media, "VirtualMedia.InsertMedia")
        .with_context(|| format!("{media_path} has no InsertMedia action"))?;
    let info = match info_link {
        Some(l) => Some(bmc.get(l).await?.body),
        None => None,
    };
    let insert_action = media
        .pointer("/Actions/#VirtualMedia.InsertMedia")
        .cloned()
        .unwrap_or(Value::Null);
    let allowed = allowable_values(&insert_action, info.as_ref(), "TransferProtocolType");
    let protocol = transfer_protocol(image_url, allowed.as_deref())?;
    let body = insert_body(image_url, protocol.as_deref());
    bmc.post_action(insert, &body).await?;
    say("inserted the ISO".to_string());
    let mut not_kept_all = Vec::new();
    let media_now = bmc.get(&media_path).await?.body;
    let mut sent = json!({"Image": image_url, "Inserted": true});
    if media_now.get("WriteProtected").is_some() {
        sent["WriteProtected"] = json!(true);
    }
    // A presigned URL's query is a read credential: not printed, not recorded.
    let shown = super::record::without_query(image_url);
    not_kept_all.extend(
        not_kept(&sent, &media_now)
            .into_iter()
            .map(|m| format!("{media_path}: {}", m.replace(image_url, &shown))),
    );

    let target = boot_patch_target(&system_path, &system.body);
    let etag = if target == system_path {
        system.etag.clone()
    } else {
        bmc.get(&target).await?.etag
    };
    let boot = boot_body(&system.body);
    bmc.patch(&target, &boot, etag.as_deref()).await?;
    say(format!("boot override Cd once on {target}"));
    let read = bmc.get(&target).await?.body;
    not_kept_all.extend(
        not_kept(&boot, &read)
            .into_iter()
            .map(|m| format!("{target}: {m}")),
    );

    let now = bmc.get(&system_path).await?.body;
    let reset = reset_type(&now)?;
    let (reset_path, _) = action(&now, "ComputerSystem.Reset")
        .with_context(|| format!("{system_path} has no ComputerSystem.Reset action"))?;
    bmc.post_action(reset_path, &json!({"ResetType": reset}))
        .await?;
    say(format!("reset {reset}"));

    let deadline = Instant::now() + power_wait;
    let mut power = None;
    loop {
        let s = bmc.get(&system_path).await?.body;
        power = s
            .get("PowerState")
            .and_then(Value::as_str)
            .map(str::to_string)
            .or(power);
        if power.as_deref() == Some("On") || Instant::now() > deadline {
            break;
        }
        tokio::time::sleep(Duration::from_secs(1)).await;
    }
    if power.as_deref() != Some("On") {
        not_kept_all.push(format!(
            "{system_path}: PowerState reads {} {}s after {reset}",
            power.as_deref().unwrap_or("nothing"),
            power_wait.as_secs()
        ));
    }
    let system_uuid = system_uuid(&system.body);
    Ok(RedfishLaunch {
        bmc: bmc.base().to_string(),
        system: system_path,
        system_uuid,
        virtual_media: media_path,
        ejected,
        boot_patched: target,
        reset: reset.to_string(),
        not_kept: not_kept_all,
        power_state: power,
    })
}

/// Ejects what the system's CD/DVD virtual media holds; returns the device's path.
pub(crate) async fn eject(bmc: &Bmc, system_id: Option<&str>) -> Result<String> {
    let found = find(bmc, system_id).await?;
    let (eject, _) = action(&found.media, "VirtualMedia.EjectMedia")
        .with_context(|| format!("{} has no EjectMedia action", found.media_path))?;
    bmc.post_action(eject, &json!({})).await?;
    Ok(found.media_path)
}

/// After a run: ejects the system's CD/DVD when something is inserted, then powers the
/// system off (`ComputerSystem.Reset` ForceOff) unless it is off already. `system_path` is
/// the system the launch used (from its record).
pub(crate) async fn power_off_and_eject(bmc: &Bmc, system_path: &str) -> Result<String> {
    let id = system_path.trim_end_matches('/').rsplit('/').next();
    let found = find(bmc, id).await?;
    let mut done = Vec::new();
    if is_inserted(&found.media) {
        let (eject, _) = action(&found.media, "VirtualMedia.EjectMedia")
            .with_context(|| format!("{} has no EjectMedia action", found.media_path))?;
        bmc.post_action(eject, &json!({})).await?;
        done.push(format!("ejected {}", found.media_path));
    } else {
        done.push(format!("nothing inserted in {}", found.media_path));
    }
    let system = bmc.get(&found.system_path).await?.body;
    if system.get("PowerState").and_then(Value::as_str) == Some("Off") {
        done.push("already powered off".into());
    } else {
        let (reset, _) = action(&system, "ComputerSystem.Reset")
            .with_context(|| format!("{} has no ComputerSystem.Reset action", found.system_path))?;
        bmc.post_action(reset, &json!({"ResetType": "ForceOff"}))
            .await?;
        done.push("ForceOff".into());
    }
    Ok(done.join(", "))
}

#[cfg(test)]
mod tests {
    use super::super::bmc::BmcOptions;
    use super::super::credentials::BmcCredentials;
    use super::*;
    use std::collections::BTreeMap;
    use std::io::{BufRead, BufReader, Read, Write};
    use std::sync::{Arc, Mutex};

    fn fixture(name: &str) -> Value {
        let p = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("tests/fixtures/redfish")
            .join(name);
        serde_json::from_str(&std::fs::read_to_string(&p).expect("fixture")).expect("json")
    }

    #[test]
    fn ami_keeps_virtual_media_under_the_manager_and_boot_settings_in_sd() {
        let root = fixture("ami-service-root-composed.json");
        let system = fixture("ami-system-composed.json");
        let manager = fixture("ami-manager-composed.json");
        assert_eq!(firmware(&root, Some(&manager)), Firmware::Ami);
        assert_eq!(
            pick_system(&fixture("ami-systems-composed.json"), None).expect("one"),
            "/redfish/v1/Systems/Self"
        );
        assert_eq!(managed_by(&system), vec!["/redfish/v1/Managers/Self"]);
        assert_eq!(
            media_collections(&system, std::slice::from_ref(&manager)),
            vec!["/redfish/v1/Managers/Self/VirtualMedia"]
        );
        assert!(!is_optical(&fixture(
            "ami-virtualmedia-usbstick1-composed.json"
        )));
        let cd = fixture("ami-virtualmedia-cd1-composed.json");
        assert!(is_optical(&cd) && is_inserted(&cd));
        let info = fixture("ami-insertmedia-actioninfo-composed.json");
        let allowed = allowable_values(
            &cd["Actions"]["#VirtualMedia.InsertMedia"],
            Some(&info),
            "TransferProtocolType",
        )
        .expect("listed");
        assert_eq!(
            transfer_protocol("https://s3.lab/b/a.iso?X-Amz-Signature=1", Some(&allowed))
                .expect("https"),
            Some("HTTPS".into())
        );
        let e = transfer_protocol("http://files.lab/a.iso", Some(&allowed)).expect_err("http");
        assert!(
            e.to_string().contains("CIFS, NFS, HTTPS but not HTTP"),
            "{e}"
        );
        assert_eq!(
            boot_patch_target("/redfish/v1/Systems/Self", &system),
            "/redfish/v1/Systems/Self/SD"
        );
        assert_eq!(reset_type(&system).expect("on"), "ForceRestart");
        assert!(not_kept(&boot_body(&system), &fixture("ami-system-sd-composed.json")).is_empty());
    }

    #[test]
    fn openbmc_takes_only_https_or_smb_and_its_media_is_under_the_manager() {
        let root = fixture("openbmc-service-root-composed.json");
        let manager = fixture("openbmc-manager-composed.json");
        let system = fixture("openbmc-system-composed.json");
        assert_eq!(firmware(&root, Some(&manager)), Firmware::OpenBmc);
        let e = check_image_url("http://files.lab/a.iso", Firmware::OpenBmc).expect_err("http");
        assert!(e.to_string().contains("only https or smb"), "{e}");
        assert!(check_image_url("https://files.lab/a.iso", Firmware::OpenBmc).is_ok());
        assert!(check_image_url("smb://files.lab/share/a.iso", Firmware::OpenBmc).is_ok());
        assert!(check_image_url("http://files.lab/a.iso", Firmware::Other).is_ok());
        assert!(check_image_url("ftp://files.lab/a.iso", Firmware::Other).is_err());
        assert_eq!(
            media_collections(&system, &[manager]),
            vec!["/redfish/v1/Managers/bmc/VirtualMedia"]
        );
        let slot = fixture("openbmc-virtualmedia-slot0-composed.json");
        assert!(is_optical(&slot) && !is_inserted(&slot));
        assert_eq!(
            transfer_protocol("https://x/a.iso", None).expect("none"),
            None
        );
        assert_eq!(reset_type(&system).expect("off"), "On");
        assert_eq!(
            boot_patch_target("/redfish/v1/Systems/system", &system),
            "/redfish/v1/Systems/system"
        );
        // Legacy now: UEFI is asked for, and a BMC reading Legacy back did not keep it.
        let body = boot_body(&system);
        assert_eq!(body["Boot"]["BootSourceOverrideMode"], "UEFI");
        let n = not_kept(&body, &system);
        assert!(
            n.iter().any(|m| m == r#"Boot/BootSourceOverrideMode was set to "UEFI" but reads "Legacy""#),
            "{n:?}"
        );
    }

    #[test]
    fn tasks_errors_and_systems() {
        assert_eq!(task_outcome(&fixture("task-running-composed.json")), None);
        assert_eq!(
            task_outcome(&fixture("task-completed-composed.json")),
            Some(Ok(()))
        );
        let e = task_outcome(&fixture("task-exception-composed.json"))
            .expect("ended")
            .expect_err("failed");
        assert!(
            e.contains("Exception") && e.contains("authorization error 403"),
            "{e}"
        );
        let msg = error_messages(
            &serde_json::to_string(&fixture("error-precondition-failed-composed.json"))
                .expect("json"),
        );
        assert!(msg.contains("The ETag supplied did not match"), "{msg}");
        let two = json!({"Members": [{"@odata.id": "/redfish/v1/Systems/a"}, {"@odata.id": "/redfish/v1/Systems/b"}]});
        assert!(pick_system(&two, None)
            .expect_err("two")
            .to_string()
            .contains("--system ID"));
        assert_eq!(
            pick_system(&two, Some("b")).expect("b"),
            "/redfish/v1/Systems/b"
        );
        assert!(pick_system(&two, Some("c"))
            .expect_err("c")
            .to_string()
            .contains("no system \"c\""));
    }

    /// A canned answer: status, body, extra headers.
    type Answer = (u16, String, Vec<(String, String)>);

    /// One request as the replay server saw it.
    #[derive(Debug, Clone)]
    struct Seen {
        method: String,
        path: String,
        if_match: Option<String>,
        body: Value,
    }

    /// A plain-HTTP server answering GETs from `pages` (path → the JSON answers in turn, the
    /// last repeated; the body's `@odata.etag` as ETag header) and POST/PATCH with `answers` (path → status, body,
    /// extra headers), recording every request.
    fn replay(
        mut pages: BTreeMap<String, Vec<Value>>,
        answers: BTreeMap<String, Answer>,
    ) -> (String, Arc<Mutex<Vec<Seen>>>) {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
        let url = format!("http://{}", listener.local_addr().expect("addr"));
        let seen = Arc::new(Mutex::new(Vec::new()));
        let log = seen.clone();
        std::thread::spawn(move || {
            for stream in listener.incoming() {
                let Ok(mut stream) = stream else { return };
                let mut reader = BufReader::new(stream.try_clone().expect("clone"));
                let mut line = String::new();
                if reader.read_line(&mut line).is_err() || line.is_empty() {
                    continue;
                }
                let mut parts = line.split_whitespace();
                let method = parts.next().unwrap_or("").to_string();
                let path = parts.next().unwrap_or("").to_string();
                let mut headers = BTreeMap::new();
                loop {
                    let mut h = String::new();
                    reader.read_line(&mut h).expect("header");
                    let h = h.trim_end();
                    if h.is_empty() {
                        break;
                    }
                    if let Some((k, v)) = h.split_once(':') {
                        headers.insert(k.trim().to_ascii_lowercase(), v.trim().to_string());
                    }
                }
                let len: usize = headers
                    .get("content-length")
                    .and_then(|l| l.parse().ok())
                    .unwrap_or(0);
                let mut body = vec![0; len];
                reader.read_exact(&mut body).expect("body");
                log.lock().expect("log").push(Seen {
                    method: method.clone(),
                    path: path.clone(),
                    if_match: headers.get("if-match").cloned(),
                    body: serde_json::from_slice(&body).unwrap_or(Value::Null),
                });
                let (status, text, extra) = if method == "GET" {
                    let next = pages.get_mut(&path).and_then(|answers| {
                        if answers.len() > 1 {
                            Some(answers.remove(0))
                        } else {
                            answers.first().cloned()
                        }
                    });
                    match next {
                        Some(v) => {
                            let mut extra = Vec::new();
                            if let Some(e) = v.get("@odata.etag").and_then(Value::as_str) {
                                extra.push(("ETag".to_string(), e.to_string()));
                            }
                            (200, v.to_string(), extra)
                        }
                        None => (404, "{}".to_string(), Vec::new()),
                    }
                } else {
                    answers
                        .get(&format!("{method} {path}"))
                        .cloned()
                        .unwrap_or((405, "{}".into(), Vec::new()))
                };
                let mut resp = format!(
                    "HTTP/1.1 {status} X\r\nContent-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n",
                    text.len()
                );
                for (k, v) in extra {
                    resp.push_str(&format!("{k}: {v}\r\n"));
                }
                resp.push_str("\r\n");
                resp.push_str(&text);
                let _ = stream.write_all(resp.as_bytes());
            }
        });
        (url, seen)
    }

    fn creds() -> BmcCredentials {
        super::super::credentials::parse("user = u\npassword = p\n").expect("creds")
    }

    /// A replay of an AMI MegaRAC BMC whose CD1 reads as `cd` in turn.
    fn ami_replay(cd: Vec<Value>) -> (String, Arc<Mutex<Vec<Seen>>>) {
        let mut pages = BTreeMap::new();
        for (path, name) in [
            ("/redfish/v1/", "ami-service-root-composed.json"),
            ("/redfish/v1/Systems", "ami-systems-composed.json"),
            ("/redfish/v1/Systems/Self", "ami-system-composed.json"),
            ("/redfish/v1/Systems/Self/SD", "ami-system-sd-composed.json"),
            ("/redfish/v1/Managers/Self", "ami-manager-composed.json"),
            (
                "/redfish/v1/Managers/Self/VirtualMedia",
                "ami-virtualmedia-composed.json",
            ),
            (
                "/redfish/v1/Managers/Self/VirtualMedia/USBStick1",
                "ami-virtualmedia-usbstick1-composed.json",
            ),
            (
                "/redfish/v1/Managers/Self/VirtualMedia/CD1/InsertMediaActionInfo",
                "ami-insertmedia-actioninfo-composed.json",
            ),
            (
                "/redfish/v1/TaskService/Tasks/7",
                "task-completed-composed.json",
            ),
        ] {
            pages.insert(path.to_string(), vec![fixture(name)]);
        }
        pages.insert("/redfish/v1/Managers/Self/VirtualMedia/CD1".into(), cd);
        let ok = || (204, String::new(), Vec::new());
        let mut answers = BTreeMap::new();
        answers.insert(
            "POST /redfish/v1/Managers/Self/VirtualMedia/CD1/Actions/VirtualMedia.EjectMedia"
                .to_string(),
            ok(),
        );
        answers.insert(
            "POST /redfish/v1/Managers/Self/VirtualMedia/CD1/Actions/VirtualMedia.InsertMedia"
                .to_string(),
            (
                202,
                json!({"@odata.id": "/redfish/v1/TaskService/Tasks/7", "TaskState": "Running"})
                    .to_string(),
                vec![(
                    "Location".to_string(),
                    "/redfish/v1/TaskService/Tasks/7".to_string(),
                )],
            ),
        );
        answers.insert("PATCH /redfish/v1/Systems/Self/SD".to_string(), ok());
        answers.insert(
            "POST /redfish/v1/Systems/Self/Actions/ComputerSystem.Reset".to_string(),
            ok(),
        );
        replay(pages, answers)
    }

    fn insecure_bmc(url: String) -> Bmc {
        Bmc::new(BmcOptions {
            url,
            credentials: creds(),
            ca_pem: None,
            insecure: true,
            timeout: Duration::from_secs(10),
        })
        .expect("bmc")
    }

    #[test]
    fn an_ami_launch_patches_sd_with_its_etag_follows_the_insert_task_and_reads_back() {
        // The CD as found, then as read back after the insert.
        let before = fixture("ami-virtualmedia-cd1-composed.json");
        let mut after = before.clone();
        let image = "https://s3.lab/b/lab/launches/x/appliance.iso?X-Amz-Signature=abc";
        after["Image"] = json!(image);
        let (url, seen) = ami_replay(vec![before, after]);
        let bmc = insecure_bmc(url);
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .expect("rt");
        let mut lines = Vec::new();
        let r = rt
            .block_on(launch(
                &bmc,
                None,
                image,
                Duration::from_secs(2),
                &mut |l| lines.push(l),
            ))
            .expect("launch");
        assert_eq!(
            r.virtual_media,
            "/redfish/v1/Managers/Self/VirtualMedia/CD1"
        );
        assert_eq!(r.ejected.as_deref(), Some("http://files.lab/old.iso"));
        assert_eq!(r.boot_patched, "/redfish/v1/Systems/Self/SD");
        assert_eq!(r.reset, "ForceRestart");
        assert!(r.not_kept.is_empty(), "{:?}", r.not_kept);
        let seen = seen.lock().expect("seen").clone();
        let writes: Vec<&Seen> = seen.iter().filter(|s| s.method != "GET").collect();
        let order: Vec<String> = writes
            .iter()
            .map(|s| format!("{} {}", s.method, s.path))
            .collect();
        assert_eq!(
            order,
            vec![
                "POST /redfish/v1/Managers/Self/VirtualMedia/CD1/Actions/VirtualMedia.EjectMedia",
                "POST /redfish/v1/Managers/Self/VirtualMedia/CD1/Actions/VirtualMedia.InsertMedia",
                "PATCH /redfish/v1/Systems/Self/SD",
                "POST /redfish/v1/Systems/Self/Actions/ComputerSystem.Reset",
            ]
        );
        assert_eq!(
            writes[1].body,
            json!({"Image": image, "Inserted": true, "WriteProtected": true, "TransferProtocolType": "HTTPS"})
        );
        assert_eq!(writes[2].if_match.as_deref(), Some("W/\"1700000456\""));
        assert_eq!(
            writes[2].body,
            json!({"Boot": {"BootSourceOverrideTarget": "Cd", "BootSourceOverrideEnabled": "Once", "BootSourceOverrideMode": "UEFI"}})
        );
        assert_eq!(writes[3].body, json!({"ResetType": "ForceRestart"}));
        assert!(
            seen.iter()
                .any(|s| s.method == "GET" && s.path == "/redfish/v1/TaskService/Tasks/7"),
            "the 202 task was followed: {seen:?}"
        );
    }

    #[test]
    fn an_image_the_bmc_does_not_keep_is_reported_without_the_urls_signature() {
        // The BMC answers the insert but keeps showing the old image.
        let (url, _) = ami_replay(vec![fixture("ami-virtualmedia-cd1-composed.json")]);
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .expect("rt");
        let image = "https://s3.lab/b/a.iso?X-Amz-Signature=secret-sig";
        let r = rt
            .block_on(launch(
                &insecure_bmc(url),
                None,
                image,
                Duration::from_secs(2),
                &mut |_| {},
            ))
            .expect("launch");
        assert_eq!(
            r.not_kept,
            vec![
                r#"/redfish/v1/Managers/Self/VirtualMedia/CD1: Image was set to "https://s3.lab/b/a.iso" but reads "http://files.lab/old.iso""#
            ]
        );
    }

    #[test]
    fn a_failed_insert_task_stops_the_launch_with_the_bmcs_message() {
        let mut pages = BTreeMap::new();
        for (path, name) in [
            ("/redfish/v1/", "ami-service-root-composed.json"),
            ("/redfish/v1/Systems", "ami-systems-composed.json"),
            ("/redfish/v1/Systems/Self", "ami-system-composed.json"),
            ("/redfish/v1/Managers/Self", "ami-manager-composed.json"),
            (
                "/redfish/v1/Managers/Self/VirtualMedia",
                "ami-virtualmedia-composed.json",
            ),
            (
                "/redfish/v1/Managers/Self/VirtualMedia/USBStick1",
                "ami-virtualmedia-usbstick1-composed.json",
            ),
            (
                "/redfish/v1/Managers/Self/VirtualMedia/CD1",
                "ami-virtualmedia-cd1-composed.json",
            ),
            (
                "/redfish/v1/Managers/Self/VirtualMedia/CD1/InsertMediaActionInfo",
                "ami-insertmedia-actioninfo-composed.json",
            ),
            (
                "/redfish/v1/TaskService/Tasks/7",
                "task-exception-composed.json",
            ),
        ] {
            pages.insert(path.to_string(), vec![fixture(name)]);
        }
        let mut answers = BTreeMap::new();
        answers.insert(
            "POST /redfish/v1/Managers/Self/VirtualMedia/CD1/Actions/VirtualMedia.EjectMedia"
                .to_string(),
            (204, String::new(), Vec::new()),
        );
        answers.insert(
            "POST /redfish/v1/Managers/Self/VirtualMedia/CD1/Actions/VirtualMedia.InsertMedia"
                .to_string(),
            (
                202,
                String::new(),
                vec![(
                    "Location".to_string(),
                    "/redfish/v1/TaskService/Tasks/7".to_string(),
                )],
            ),
        );
        let (url, seen) = replay(pages, answers);
        let bmc = Bmc::new(BmcOptions {
            url,
            credentials: creds(),
            ca_pem: None,
            insecure: true,
            timeout: Duration::from_secs(10),
        })
        .expect("bmc");
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .expect("rt");
        let e = rt
            .block_on(launch(
                &bmc,
                None,
                "https://files.lab/a.iso",
                Duration::from_secs(1),
                &mut |_| {},
            ))
            .expect_err("task failed");
        let e = format!("{e:#}");
        assert!(
            e.contains("task ended Exception") && e.contains("authorization error 403"),
            "{e}"
        );
        assert!(
            !seen
                .lock()
                .expect("seen")
                .iter()
                .any(|s| s.method == "PATCH" || s.path.ends_with("Reset")),
            "nothing after a failed insert"
        );
    }
}
