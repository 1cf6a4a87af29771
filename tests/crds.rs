//! The CRD in `crds/` is exactly what the Rust types generate, it carries Flux's field
//! names, defaults and validation, and the sample manifests in `testdata/samples/` are
//! accepted by both the CRD schema (a small structural-schema checker below) and
//! `validate()`, while those in `testdata/samples/invalid/` fail with field-named errors.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

use ocisource::api::{crds_yaml, OciRepository};
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

/// Checks `value` against a structural schema the way the API server would reject it:
/// types, required fields, enums, patterns, and unknown fields (which the server would
/// silently prune). Returns the paths that fail.
fn schema_errors(schema: &Value, value: &Value, path: &str, errors: &mut Vec<String>) {
    if value.is_null() && schema["nullable"] == true {
        return;
    }
    match schema["type"].as_str() {
        Some("object") => {
            let Some(object) = value.as_object() else {
                return errors.push(format!("{path}: not an object"));
            };
            for required in schema["required"].as_array().into_iter().flatten() {
                if !object.contains_key(required.as_str().unwrap()) {
                    errors.push(format!("{path}.{}: required", required.as_str().unwrap()));
                }
            }
            for (key, v) in object {
                let child = format!("{path}.{key}");
                if let Some(s) = schema["properties"].get(key) {
                    schema_errors(s, v, &child, errors);
                } else if schema["additionalProperties"].is_object() {
                    schema_errors(&schema["additionalProperties"], v, &child, errors);
                } else if !(path.is_empty()
                    && ["apiVersion", "kind", "metadata"].contains(&key.as_str()))
                {
                    errors.push(format!("{child}: unknown field"));
                }
            }
        }
        Some("array") => match value.as_array() {
            Some(items) => items
                .iter()
                .for_each(|v| schema_errors(&schema["items"], v, &format!("{path}[]"), errors)),
            None => errors.push(format!("{path}: not an array")),
        },
        Some("string") => {
            let Some(s) = value.as_str() else {
                return errors.push(format!("{path}: not a string"));
            };
            if let Some(pattern) = schema["pattern"].as_str() {
                if !regex::Regex::new(pattern).unwrap().is_match(s) {
                    errors.push(format!("{path}: does not match {pattern}"));
                }
            }
            if let Some(allowed) = schema["enum"].as_array() {
                if !allowed.contains(value) {
                    errors.push(format!("{path}: not one of {allowed:?}"));
                }
            }
        }
        Some("boolean") if !value.is_boolean() => errors.push(format!("{path}: not a boolean")),
        Some("integer") if !value.is_i64() => errors.push(format!("{path}: not an integer")),
        _ => {}
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
fn every_sample_passes_the_crd_schema_and_validate() {
    let schema = schema();
    let files = yaml_files(&root().join("testdata/samples"));
    assert!(
        files.len() >= 6,
        "expected the tag, semver, digest, verify, keyless and copy samples"
    );
    for file in files {
        let text = std::fs::read_to_string(&file).unwrap();
        let value: Value = serde_yaml::from_str(&text).unwrap();
        let mut errors = Vec::new();
        schema_errors(&schema, &value, "", &mut errors);
        assert!(
            errors.is_empty(),
            "{}: schema rejects it: {errors:?}",
            file.display()
        );
        let object: OciRepository =
            serde_yaml::from_str(&text).unwrap_or_else(|e| panic!("{}: {e}", file.display()));
        assert_eq!(
            object.spec.timeout_duration().map(|d| d.as_secs() > 0),
            Some(true)
        );
        if let Err(e) = object.validate() {
            panic!("{}: {e}", file.display());
        }
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

#[test]
fn the_schema_itself_rejects_what_kubectl_should_reject_early() {
    let schema = schema();
    let check = |yaml: &str| {
        let mut errors = Vec::new();
        schema_errors(
            &schema,
            &serde_yaml::from_str(yaml).unwrap(),
            "",
            &mut errors,
        );
        errors
    };
    let base = "apiVersion: ocisource.dev/v1beta1\nkind: OCIRepository\nmetadata: {name: x}\n";
    assert!(check(&format!("{base}spec: {{interval: 5m, url: 'oci://r/a'}}")).is_empty());
    let cases = [
        ("spec: {interval: 5m, url: 'https://r/a'}", ".spec.url"),
        ("spec: {interval: 5d, url: 'oci://r/a'}", ".spec.interval"),
        (
            "spec: {interval: 5m, url: 'oci://r/a', timeout: 1h}",
            ".spec.timeout",
        ),
        (
            "spec: {interval: 5m, url: 'oci://r/a', provider: oracle}",
            ".spec.provider",
        ),
        (
            "spec: {interval: 5m, url: 'oci://r/a', layerSelector: {operation: move}}",
            ".spec.layerSelector.operation",
        ),
        (
            "spec: {interval: 5m, url: 'oci://r/a', platform: linux}",
            ".spec.platform",
        ),
        (
            "spec: {interval: 5m, url: 'oci://r/a', ref: {semverfilter: x}}",
            ".spec.ref.semverfilter",
        ),
        ("spec: {url: 'oci://r/a'}", ".spec.interval"),
    ];
    for (spec, field) in cases {
        let errors = check(&format!("{base}{spec}"));
        assert!(
            errors.iter().any(|e| e.starts_with(&format!("{field}:"))),
            "{spec}: {errors:?}"
        );
    }
}
