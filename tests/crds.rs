//! The CRD in `crds/` is exactly what the Rust types generate, it carries Flux's field
//! names, defaults and validation, and the sample manifests in `testdata/samples/` pass
//! `validate()`, while those in `testdata/samples/invalid/` fail with field-named errors.
//! The schema itself is judged by the real API server: tests/cluster_crd_schema.rs.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

use ocisource::api::{crds_yaml, Flavour, OciRepository};
use serde_json::Value;

const CRD_FILE: &str = "crds/ocirepositories.ocisource.dev.yaml";

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

#[test]
fn crd_file_matches_generated_output() {
    let on_disk = std::fs::read_to_string(root().join(CRD_FILE)).unwrap_or_default();
    assert!(
        on_disk == crds_yaml(),
        "{CRD_FILE} is out of date with the Rust types: run `cargo run -- crd > {CRD_FILE}`"
    );
}

fn schema() -> Value {
    let crd: Value = serde_yaml::from_str(&crds_yaml()).unwrap();
    let version = &crd["spec"]["versions"][0];
    assert_eq!(version["name"], "v1beta1");
    version["schema"]["openAPIV3Schema"].clone()
}

#[test]
fn crd_has_the_promised_names_columns_and_subresource() {
    let crd: Value = serde_yaml::from_str(&crds_yaml()).unwrap();
    assert_eq!(crd["metadata"]["name"], "ocirepositories.ocisource.dev");
    assert_eq!(crd["spec"]["scope"], "Namespaced");
    assert_eq!(crd["spec"]["names"]["kind"], "OCIRepository");
    // Flux's short name and categories (`kubectl get fluxcd-sources` lists it), plus
    // `ocisrc`, unambiguous when Flux's OCIRepository CRD is installed too.
    assert_eq!(
        crd["spec"]["names"]["shortNames"],
        serde_json::json!(["ocirepo", "ocisrc"])
    );
    assert_eq!(
        crd["spec"]["names"]["categories"],
        serde_json::json!(["all", "fluxcd", "fluxcd-sources"])
    );
    assert_eq!(
        crd["metadata"]["annotations"]["kustomize.toolkit.fluxcd.io/substitute"],
        "disabled"
    );
    let version = &crd["spec"]["versions"][0];
    // Flux's OCIRepository v1 columns (source-controller 39b711b1), name, type, path.
    let flux = [
        ("URL", "string", ".spec.url"),
        (
            "Ready",
            "string",
            r#".status.conditions[?(@.type=="Ready")].status"#,
        ),
        (
            "Status",
            "string",
            r#".status.conditions[?(@.type=="Ready")].message"#,
        ),
        ("Age", "date", ".metadata.creationTimestamp"),
    ];
    let ours: Vec<(&str, &str, &str)> = version["additionalPrinterColumns"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| {
            let field = |k: &str| c[k].as_str().unwrap();
            (field("name"), field("type"), field("jsonPath"))
        })
        .collect();
    assert_eq!(ours, flux, "printer columns as Flux's");
    assert!(version["subresources"]["status"].is_object());
}

#[test]
fn spec_has_every_flux_v1_field_with_flux_defaults_and_validation() {
    let schema = schema();
    let spec = &schema["properties"]["spec"];
    let props = |v: &Value| {
        v["properties"]
            .as_object()
            .unwrap()
            .keys()
            .cloned()
            .collect::<BTreeSet<_>>()
    };
    let flux = [
        "certSecretRef",
        "ignore",
        "insecure",
        "interval",
        "layerSelector",
        "provider",
        "proxySecretRef",
        "ref",
        "secretRef",
        "serviceAccountName",
        "suspend",
        "timeout",
        "url",
        "verify",
    ];
    let ours = props(spec);
    for field in flux {
        assert!(ours.contains(field), "spec.{field} missing");
    }
    assert!(ours.contains("platform"));
    assert_eq!(
        props(&spec["properties"]["ref"]),
        ["digest", "semver", "semverFilter", "tag"]
            .map(String::from)
            .into()
    );
    assert_eq!(
        props(&spec["properties"]["verify"]),
        [
            "matchOIDCIdentity",
            "provider",
            "secretRef",
            "trustedRootSecretRef"
        ]
        .map(String::from)
        .into()
    );
    assert_eq!(
        props(&spec["properties"]["layerSelector"]),
        ["mediaType", "operation"].map(String::from).into()
    );
    let p = &spec["properties"];
    assert_eq!(p["url"]["pattern"], "^oci://.*$");
    assert_eq!(
        p["interval"]["pattern"],
        r"^([0-9]+(\.[0-9]+)?(ms|s|m|h))+$"
    );
    assert_eq!(p["timeout"]["pattern"], r"^([0-9]+(\.[0-9]+)?(ms|s|m))+$");
    assert_eq!(p["timeout"]["default"], "60s");
    assert_eq!(p["provider"]["default"], "generic");
    assert_eq!(
        p["provider"]["enum"],
        serde_json::json!(["generic", "aws", "azure", "gcp"])
    );
    assert_eq!(p["verify"]["properties"]["provider"]["default"], "cosign");
    assert_eq!(
        p["layerSelector"]["properties"]["operation"]["enum"],
        serde_json::json!(["extract", "copy"])
    );
    assert_eq!(spec["required"], serde_json::json!(["interval", "url"]));
    let status = props(&schema["properties"]["status"]);
    for field in [
        "artifact",
        "conditions",
        "lastHandledReconcileAt",
        "observedGeneration",
        "observedIgnore",
        "observedLayerSelector",
        "url",
    ] {
        assert!(status.contains(field), "status.{field} missing");
    }
}

fn yaml_files(dir: &Path) -> Vec<PathBuf> {
    let mut files: Vec<PathBuf> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "yaml"))
        .collect();
    files.sort();
    files
}

#[test]
fn every_sample_passes_validate() {
    let files = yaml_files(&root().join("testdata/samples"));
    assert!(
        files.len() >= 6,
        "expected the tag, semver, digest, verify, keyless and copy samples"
    );
    for file in files {
        let text = std::fs::read_to_string(&file).unwrap();
        let object: OciRepository =
            serde_yaml::from_str(&text).unwrap_or_else(|e| panic!("{}: {e}", file.display()));
        let desired = ocisource::api::validate::desired(&object.spec, &Flavour::Ocisource)
            .unwrap_or_else(|e| panic!("{}: {e}", file.display()));
        assert!(desired.timeout.as_secs() > 0, "{}", file.display());
    }
}

#[test]
fn invalid_samples_fail_validate_naming_each_bad_field() {
    let files = yaml_files(&root().join("testdata/samples/invalid"));
    assert!(!files.is_empty());
    for file in files {
        let text = std::fs::read_to_string(&file).unwrap();
        let expected: BTreeSet<&str> = text
            .lines()
            .find_map(|l| l.strip_prefix("# expect:"))
            .unwrap_or_else(|| panic!("{}: no '# expect:' line", file.display()))
            .split_whitespace()
            .collect();
        let object: OciRepository = serde_yaml::from_str(&text).unwrap();
        let err = object.validate().expect_err(&file.display().to_string());
        let fields: BTreeSet<&str> = err.fields().into_iter().collect();
        assert_eq!(fields, expected, "{}: {err}", file.display());
        for field in expected {
            assert!(
                err.to_string().contains(&format!("{field}: ")),
                "message names {field}: {err}"
            );
        }
    }
}
