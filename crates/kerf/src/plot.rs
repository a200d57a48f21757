//! `kerf plot`: a `--record` file's curves as a picture, SVG or PNG by the output's
//! extension. The curves and their layout are `kerf_tools::plot`'s; PNG is the SVG
//! rasterised (resvg, with the system's fonts).

use std::path::PathBuf;

#[derive(clap::Args)]
pub struct Args {
    /// A file `kerf count`, `kerf time` or `kerf sum` wrote with --record.
    record: PathBuf,
    /// The picture: FILE.svg or FILE.png.
    #[arg(short = 'o', long = "output", value_name = "FILE")]
    output: PathBuf,
    /// Curves per panel at most: the functions (or points) with the largest totals.
    #[arg(long, default_value_t = 8, value_parser = clap::value_parser!(u16).range(1..=64))]
    most: u16,
}

/// Why plotting failed, with the file.
fn fail(path: &std::path::Path, what: impl std::fmt::Display) -> crate::Error {
    crate::Error::Plot { path: path.to_path_buf(), what: what.to_string() }
}

pub fn run(args: Args) -> Result<(), crate::Error> {
    let ext = args.output.extension().and_then(|e| e.to_str()).map(str::to_ascii_lowercase);
    let png = match ext.as_deref() {
        Some("png") => true,
        Some("svg") => false,
        _ => return Err(fail(&args.output, "the picture's name must end in .svg or .png")),
    };
    let text = std::fs::read_to_string(&args.record).map_err(|e| fail(&args.record, e))?;
    let rec = kerf_tools::plot::parse(&text).map_err(|e| fail(&args.record, e))?;
    let panels = kerf_tools::plot::panels(&rec, args.most as usize);
    if panels.is_empty() {
        let why = "no curves: the record needs a sample of a tool that records (count, time, sum)";
        return Err(fail(&args.record, why));
    }
    let title = format!("kerf {}: {}", rec.tool, rec.target);
    let svg = kerf_tools::plot::svg(&panels, &title);
    let bytes =
        if png { rasterise(&svg).map_err(|e| fail(&args.output, e))? } else { svg.into_bytes() };
    std::fs::write(&args.output, bytes).map_err(|e| fail(&args.output, e))
}

/// The PNG of an SVG picture, at its own size.
fn rasterise(svg: &str) -> Result<Vec<u8>, String> {
    let mut opt = resvg::usvg::Options::default();
    opt.fontdb_mut().load_system_fonts();
    let tree = resvg::usvg::Tree::from_str(svg, &opt).map_err(|e| e.to_string())?;
    let size = tree.size().to_int_size();
    let mut pixmap =
        resvg::tiny_skia::Pixmap::new(size.width(), size.height()).ok_or("an empty picture")?;
    resvg::render(&tree, resvg::tiny_skia::Transform::default(), &mut pixmap.as_mut());
    pixmap.encode_png().map_err(|e| e.to_string())
}
