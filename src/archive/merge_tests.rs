//! Unit tests of `merge.rs`, kept beside it so that file reads as the code alone.

use super::*;

fn win(state: &mut State, layer: u32, path: &str, kind: Kind) -> Result<Place, Conflict> {
    let place = state.place(layer, path, kind)?;
    if let Place::Win { missing, .. } = &place {
        state
            .record(path, kind, layer, false, &vec![false; *missing])
            .unwrap();
    }
    Ok(place)
}

fn state() -> State {
    State::new(1 << 20)
}

#[test]
fn first_version_wins_and_parents_are_missing_once() {
    let mut s = state();
    assert_eq!(
        win(&mut s, 0, "a/b/c", Kind::File),
        Ok(Place::Win {
            missing: 2,
            parent_ignored: false
        })
    );
    assert_eq!(
        win(&mut s, 0, "a/b/d", Kind::File),
        Ok(Place::Win {
            missing: 0,
            parent_ignored: false
        })
    );
    assert_eq!(win(&mut s, 1, "a/b/c", Kind::File), Ok(Place::Skip));
    assert_eq!(
        win(&mut s, 0, "a/b/c", Kind::File),
        Err(Conflict::Duplicate)
    );
    assert_eq!(
        win(&mut s, 0, "a/b", Kind::Dir),
        Ok(Place::Skip),
        "explicit dir after its child"
    );
}

#[test]
fn whiteouts_apply_to_lower_layers_only() {
    let mut s = state();
    s.hide("x", 0).unwrap();
    s.make_opaque("d", 0).unwrap();
    assert!(matches!(
        win(&mut s, 0, "x/keep", Kind::File),
        Ok(Place::Win { .. })
    ));
    assert_eq!(win(&mut s, 1, "x/other", Kind::File), Ok(Place::Skip));
    assert_eq!(win(&mut s, 1, "d/f", Kind::File), Ok(Place::Skip));
    assert!(
        matches!(win(&mut s, 1, "d", Kind::Dir), Ok(Place::Win { .. })),
        "opaque keeps the dir"
    );
}

#[test]
fn higher_file_shadows_lower_subtree() {
    let mut s = state();
    win(&mut s, 0, "etc", Kind::File).unwrap();
    assert_eq!(win(&mut s, 1, "etc/passwd", Kind::File), Ok(Place::Skip));
    win(&mut s, 0, "ln", Kind::Symlink).unwrap();
    assert_eq!(win(&mut s, 1, "ln/x", Kind::File), Ok(Place::Skip));
    assert_eq!(
        win(&mut s, 0, "ln/y", Kind::File),
        Err(Conflict::ThroughSymlink("ln".into()))
    );
    assert_eq!(
        win(&mut s, 0, "etc/y", Kind::File),
        Err(Conflict::UnderFile("etc".into()))
    );
}

#[test]
fn lower_symlink_under_higher_entries_is_refused_unless_a_real_dir_replaced_it() {
    let mut s = state();
    win(&mut s, 0, "a/x", Kind::File).unwrap();
    assert_eq!(
        win(&mut s, 1, "a", Kind::Symlink),
        Err(Conflict::SymlinkUnderEntries)
    );
    let mut s = state();
    win(&mut s, 0, "a/x", Kind::File).unwrap();
    win(&mut s, 1, "a", Kind::Dir).unwrap();
    assert_eq!(win(&mut s, 2, "a", Kind::Symlink), Ok(Place::Skip));
    let mut s = state();
    win(&mut s, 0, "a", Kind::Dir).unwrap();
    win(&mut s, 1, "a/x", Kind::File).unwrap();
    assert_eq!(
        win(&mut s, 2, "a", Kind::Symlink),
        Err(Conflict::SymlinkUnderEntries)
    );
}

#[test]
fn any_under_sees_winners_only() {
    let mut s = state();
    for p in ["a/x", "a/y/z", "ab", "a0"] {
        win(&mut s, 0, p, Kind::File).unwrap();
    }
    s.hide("a/gone", 0).unwrap();
    let mut got = Vec::new();
    s.any_under("a", 0, |p, _, depth| {
        got.push(format!("{p}@{depth}"));
        ControlFlow::Continue(depth + 1)
    });
    got.sort();
    assert_eq!(got, vec!["a/x@0", "a/y/z@1", "a/y@0"]);
}

#[test]
fn shared_components_stop_at_a_component_boundary() {
    for (a, b, n) in [
        ("x/y/z", "x/y/w", 2),
        ("x/y", "x/y/z", 2),
        ("x/yy", "x/y", 1),
        ("abc", "xyz", 0),
        ("", "a", 0),
        ("a/b", "a/b", 2),
    ] {
        assert_eq!(shared_components(a, b), n, "{a} {b}");
        assert_eq!(shared_components(b, a), n, "{b} {a}");
    }
}

#[test]
fn places_in_any_order_agree_with_the_tree() {
    // Reusing the last path's nodes must not leak a stale node into another path.
    let mut s = state();
    for p in ["a/b/c", "a/b/d", "a/x", "a/b/c/e", "b", "a/b"] {
        let kind = if p == "a/b/c" { Kind::Dir } else { Kind::File };
        let _ = win(&mut s, 0, p, kind);
    }
    assert_eq!(
        win(&mut s, 1, "a/x/y", Kind::File),
        Ok(Place::Skip),
        "under a file"
    );
    let mut got = Vec::new();
    s.any_under("", (), |p, _, ()| {
        got.push(p.to_string());
        ControlFlow::Continue(())
    });
    got.sort();
    assert_eq!(
        got,
        vec!["a", "a/b", "a/b/c", "a/b/c/e", "a/b/d", "a/x", "b"]
    );
}

#[test]
fn an_opaque_root_hides_every_lower_path() {
    let mut s = state();
    s.make_opaque("", 0).unwrap();
    assert!(matches!(
        win(&mut s, 0, "top", Kind::File),
        Ok(Place::Win { .. })
    ));
    assert_eq!(win(&mut s, 1, "low", Kind::File), Ok(Place::Skip));
}

#[test]
fn remembering_stops_at_the_budget() {
    let mut s = State::new(4096);
    let mut refused = None;
    for i in 0..1000 {
        let path = format!("dir{i}/file");
        if let Ok(Place::Win { missing, .. }) = s.place(0, &path, Kind::File) {
            if s.record(&path, Kind::File, 0, false, &vec![false; missing])
                .is_err()
            {
                refused = Some(i);
                break;
            }
        }
    }
    let at = refused.expect("the budget must stop the merge");
    assert!(at > 5 && at < 100, "{at}");
    assert_eq!(s.hide("more/whiteouts", 1), Err(TooManyPaths));
}
