//! 1,000 generated malformed command lines: each gives exactly one line of output, an
//! `ERROR:` line, never a panic; a valid command after them still works.

/// A small seeded generator (xorshift64*), so a failure reproduces.
struct Gen(u64);

impl Gen {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }
    fn below(&mut self, n: usize) -> usize {
        (self.next() % n as u64) as usize
    }
    fn pick<'a>(&mut self, xs: &[&'a str]) -> &'a str {
        xs[self.below(xs.len())]
    }
    /// Text without quotes or backslashes.
    fn text(&mut self) -> String {
        let alphabet = b"abcxyz019 :,{}[]=>#@$%^&*()-_ ";
        (0..self.below(12))
            .map(|_| alphabet[self.below(alphabet.len())] as char)
            .collect()
    }
    fn word(&mut self) -> String {
        (0..1 + self.below(8))
            .map(|_| (b'a' + self.below(26) as u8) as char)
            .collect()
    }
}

fn malformed(g: &mut Gen) -> String {
    let valid = [
        "put 't', 'r', 'f:q', 'v'",
        "get 't', 'r'",
        "scan 't', {LIMIT => 2}",
        "create 'x', 'f', {SPLITS => ['a']}",
        "describe 't'",
    ];
    match g.below(13) {
        0 => format!("zz{} '{}'", g.word(), g.text()),
        1 => format!(
            "{} 't', '{}",
            g.pick(&["get", "put", "scan", "list"]),
            g.text()
        ),
        2 => {
            let v = g.pick(&valid);
            let cut = 1 + v[..v.len() - 1].rfind(' ').unwrap_or(0);
            format!(
                "{} {} {}",
                &v[..cut],
                g.pick(&["@", "$", ";", "(", ")", "=", "!", "%"]),
                &v[cut..]
            )
        }
        3 => g
            .pick(&[
                "put 't'",
                "get",
                "describe 't', 't'",
                "incr",
                "delete 't', 'r'",
                "append 't', 'r', 'f:q'",
                "list_regions",
                "exists",
            ])
            .to_string(),
        4 => format!(
            "create 't{}', {{NAME => 'f'{}",
            g.word(),
            g.pick(&["", ",", " =>", ", VERSIONS =>"])
        ),
        5 => format!(
            "put 't', {}, 'f:q', 'v'",
            g.pick(&["1", "nil", "true", "[]", "{}", "-1"])
        ),
        6 => format!("get 'nosuch{}', 'r'", g.word()),
        7 => format!("list '{}('", g.word()),
        8 => format!("scan 't', {{FILTER => \"{}((\"}}", g.word()),
        9 => format!("){}", g.text()),
        10 => format!("get 't', {}", g.word()),
        11 => g
            .pick(&[
                "alter 't'",
                "alter 't', METHOD => 'rename'",
                "split",
                "split 'default:t,x,99'",
                "merge_region 'x'",
                "merge_region '1', '1', '1', '1'",
                "create_index 't'",
                "create_index 't', 'i', 'noqualifier'",
                "scan_index 't', 'nosuch'",
                "verify_index 't'",
                "aggregate 't'",
                "aggregate 't', 'sum'",
                "aggregate 't', 'mode', 'f:q'",
                "list_coprocessors",
                "truncate_preserve",
                "count 't', {INTERVAL => 0}",
                "create 's', 'f', {SALT_BUCKETS => 0}",
            ])
            .to_string(),
        _ => format!(
            "scan 't', {{{} => 1}}",
            g.pick(&["NOPE", "LIMIT", "'x'", "VERSIONS", "TIMERANGE", "RAW"])
        )
        .replace("{LIMIT => 1}", "{LIMIT => 0}")
        .replace("{VERSIONS => 1}", "{VERSIONS => -1}"),
    }
}

#[tokio::test]
async fn malformed_lines_each_give_one_error() {
    let data = tempfile::tempdir().unwrap();
    let conn = basalt_cli::DataDir::open(data.path()).await.unwrap();
    let mut out = Vec::new();
    basalt_cli::run_script(&conn, "create 't', 'f'", &mut out)
        .await
        .unwrap();
    let mut shell = basalt_cli::Shell::new(conn.clone());
    let mut g = Gen(0x9E37_79B9_7F4A_7C15);
    for _ in 0..1000 {
        let line = malformed(&mut g);
        let mut out = Vec::new();
        let flow = shell.execute(&line, &mut out).await.unwrap();
        assert_eq!(flow, basalt_cli::Flow::Continue, "{line}");
        let text = String::from_utf8(out).unwrap();
        let lines: Vec<&str> = text.lines().collect();
        assert_eq!(lines.len(), 1, "{line:?} gave {text:?}");
        assert!(lines[0].starts_with("ERROR: "), "{line:?} gave {text:?}");
    }
    let mut out = Vec::new();
    for line in ["put 't', 'r1', 'f:q', 'v1', 5", "get 't', 'r1'"] {
        shell.execute(line, &mut out).await.unwrap();
    }
    let text = String::from_utf8(out).unwrap();
    assert!(
        text.contains(" f:q                               timestamp=5, value=v1\n"),
        "{text}"
    );
    assert!(text.contains("1 row(s)\n"), "{text}");
    conn.close().await.unwrap();
}
