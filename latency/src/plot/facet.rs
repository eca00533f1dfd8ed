//! Splitting a plot's lines into panels: which columns make the panels, which name the
//! lines. Pure logic over the rows' values of the label columns.
#![forbid(unsafe_code)]

use super::PROVENANCE;

/// A row (or group of rows) to draw, with its values of the label columns.
pub(super) type Item<T> = (Vec<String>, T);

/// One panel: its title (the facet values) and its series, each with its legend label
/// (the columns that vary within the panel).
#[derive(Debug, Clone, PartialEq)]
pub struct Panel<T> {
    pub title: String,
    pub series: Vec<(String, T)>,
}

/// Splits `items` (each with its values of `columns`) into panels of at most `max_series`
/// items. The facet columns are the set of at most three varying columns that does this
/// with the fewest panels (the earliest such set in `columns` order on a tie); when no set
/// does, the one with the smallest largest panel.
pub fn facet<T>(
    columns: &[&str],
    items: Vec<(Vec<String>, T)>,
    max_series: usize,
) -> Vec<Panel<T>> {
    let varying: Vec<usize> = (0..columns.len())
        .filter(|&j| items.iter().any(|(v, _)| v[j] != items[0].0[j]))
        .collect();
    let all = varying;
    let varying = informative(all.clone(), &items);
    // Shown, never split on: columns that follow from others, except those that only say
    // where a row was measured.
    let dependent: Vec<usize> = all
        .iter()
        .copied()
        .filter(|j| !varying.contains(j) && !PROVENANCE.contains(&columns[*j]))
        .collect();
    let mut best: Option<(Vec<usize>, (bool, usize, usize))> = None;
    for subset in subsets(&varying, 3) {
        let keys: Vec<Vec<&String>> = items
            .iter()
            .map(|(v, _)| subset.iter().map(|&j| &v[j]).collect())
            .collect();
        let mut distinct: Vec<&Vec<&String>> = Vec::new();
        let mut largest = 0;
        for k in &keys {
            if !distinct.contains(&k) {
                distinct.push(k);
                largest = largest.max(keys.iter().filter(|o| *o == k).count());
            }
        }
        // Ordered: feasible first, then fewer panels, then a smaller largest panel.
        let score = if largest <= max_series {
            (false, distinct.len(), largest)
        } else {
            (true, largest, distinct.len())
        };
        if best.as_ref().is_none_or(|(_, s)| score < *s) {
            best = Some((subset, score));
        }
    }
    let facets = best.map(|b| b.0).unwrap_or_default();
    if !facets.is_empty() && items.len() > max_series && !has_shared_panel(&facets, &items) {
        // Faceting would leave one line per panel: a few panels of several lines, in
        // order, say more.
        let mut shown: Vec<usize> = varying.iter().chain(&dependent).copied().collect();
        shown.sort_unstable();
        return chunks(columns, &shown, items, max_series);
    }
    let mut panels: Vec<(Vec<String>, Vec<Item<T>>)> = Vec::new();
    for (v, item) in items {
        let key: Vec<String> = facets.iter().map(|&j| v[j].clone()).collect();
        match panels.iter_mut().find(|p| p.0 == key) {
            Some(p) => p.1.push((v, item)),
            None => panels.push((key, vec![(v, item)])),
        }
    }
    panels
        .into_iter()
        .map(|(_, members)| {
            // The title names the facet; the legend what tells the lines apart, or, for a
            // lone line, everything else that varies over the figure.
            let varies = |j: &usize| members.iter().any(|(v, _)| v[*j] != members[0].0[*j]);
            let mut title: Vec<usize> = facets.clone();
            title.extend(dependent.iter().copied().filter(|j| !varies(j)));
            title.sort_unstable();
            let mut inner: Vec<usize> = varying
                .iter()
                .chain(&dependent)
                .copied()
                .filter(|j| !title.contains(j))
                .filter(|j| members.len() == 1 || varies(j))
                .collect();
            inner.sort_unstable();
            let text = |cols: &[usize], v: &[String]| {
                cols.iter()
                    .map(|&j| format!("{}={}", columns[j], v[j]))
                    .collect::<Vec<_>>()
                    .join(", ")
            };
            let title = text(&title, &members[0].0);
            let series = members
                .into_iter()
                .map(|(v, item)| (text(&inner, &v), item))
                .collect();
            Panel { title, series }
        })
        .collect()
}

/// Whether some two items fall into the same panel when faceted by `facets`.
fn has_shared_panel<T>(facets: &[usize], items: &[(Vec<String>, T)]) -> bool {
    let key = |v: &Vec<String>| facets.iter().map(|&j| v[j].clone()).collect::<Vec<_>>();
    let mut keys: Vec<Vec<String>> = items.iter().map(|(v, _)| key(v)).collect();
    keys.sort();
    keys.windows(2).any(|w| w[0] == w[1])
}

/// `items` in order, `max_series` to a panel, untitled, labelled by every varying column.
fn chunks<T>(
    columns: &[&str],
    varying: &[usize],
    items: Vec<(Vec<String>, T)>,
    max_series: usize,
) -> Vec<Panel<T>> {
    let mut panels: Vec<Panel<T>> = Vec::new();
    for (v, item) in items {
        let label = varying
            .iter()
            .map(|&j| format!("{}={}", columns[j], v[j]))
            .collect::<Vec<_>>()
            .join(", ");
        match panels.last_mut() {
            Some(p) if p.series.len() < max_series => p.series.push((label, item)),
            _ => panels.push(Panel {
                title: String::new(),
                series: vec![(label, item)],
            }),
        }
    }
    panels
}

/// `varying` without the columns whose value follows from the others' (a `gpu` column
/// that only repeats whether the topology uses one), the latest column first.
fn informative<T>(varying: Vec<usize>, items: &[(Vec<String>, T)]) -> Vec<usize> {
    let mut kept = varying.clone();
    for &j in varying.iter().rev() {
        let others: Vec<usize> = kept.iter().copied().filter(|&k| k != j).collect();
        if others.is_empty() {
            continue;
        }
        let determined = items.iter().all(|(a, _)| {
            items
                .iter()
                .all(|(b, _)| a[j] == b[j] || others.iter().any(|&k| a[k] != b[k]))
        });
        if determined {
            kept.retain(|&k| k != j);
        }
    }
    kept
}

/// Every subset of `of` with at most `most` members, smallest first, each in order.
fn subsets(of: &[usize], most: usize) -> Vec<Vec<usize>> {
    let mut out = vec![Vec::new()];
    for size in 1..=most.min(of.len()) {
        let mut next = Vec::new();
        for s in out.iter().filter(|s| s.len() == size - 1) {
            let from = s.last().map_or(0, |&last| {
                of.iter().position(|&x| x == last).unwrap_or(0) + 1
            });
            for &x in &of[from..] {
                let mut t = s.clone();
                t.push(x);
                next.push(t);
            }
        }
        out.extend(next);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn items(rows: &[[&str; 3]]) -> Vec<(Vec<String>, usize)> {
        rows.iter()
            .enumerate()
            .map(|(i, r)| (r.iter().map(|s| s.to_string()).collect(), i))
            .collect()
    }

    #[test]
    fn few_rows_share_one_untitled_panel_labelled_by_what_varies() {
        let cols = ["topology", "pollers", "gpu"];
        let p = facet(
            &cols,
            items(&[["cpu", "0", "none"], ["gpu-persistent", "8", "H200"]]),
            6,
        );
        assert_eq!(p.len(), 1);
        assert_eq!(p[0].title, "");
        // `pollers` follows from `topology` here and is shown; `gpu` only says where.
        let labels: Vec<&str> = p[0].series.iter().map(|s| s.0.as_str()).collect();
        assert_eq!(
            labels,
            [
                "topology=cpu, pollers=0",
                "topology=gpu-persistent, pollers=8"
            ]
        );
    }

    #[test]
    fn many_rows_are_faceted_into_small_panels() {
        let cols = ["doorbell", "payload_bytes", "host"];
        let mut rows = Vec::new();
        for d in ["cpu-assisted", "regular", "blueflame"] {
            for b in ["32", "64", "128", "256"] {
                rows.push([d, b, "lab"]);
            }
        }
        let p = facet(&cols, items(&rows), 4);
        assert_eq!(p.len(), 3, "one panel per doorbell");
        assert_eq!(p[1].title, "doorbell=regular");
        assert!(p.iter().all(|p| p.series.len() == 4));
        assert_eq!(p[0].series[2].0, "payload_bytes=128");
        // With room for two lines a panel, two facets are needed.
        let p = facet(&cols, items(&rows), 2);
        assert!(p.iter().all(|p| p.series.len() <= 2), "{p:?}");
        assert!(p.len() <= 12);
    }

    #[test]
    fn a_facet_of_lone_lines_becomes_a_few_panels_in_order() {
        let cols = ["payload_bytes", "mode", "host"];
        let rows: Vec<[&str; 3]> = ["32", "64", "128", "256", "512"]
            .iter()
            .map(|b| [*b, "ping-pong", "vm"])
            .collect();
        let p = facet(&cols, items(&rows), 3);
        assert_eq!(p.len(), 2);
        assert_eq!(p[0].series.len(), 3);
        assert_eq!(p[1].series[1].0, "payload_bytes=512");
    }
}
