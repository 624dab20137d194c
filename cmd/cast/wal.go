package main

import (
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/walcast/walcast/wal"
	"github.com/walcast/walcast/wire"
)

func init() {
	register(command{name: "wal", summary: "inspect, repair and export a WAL directory: `cast wal stat|dump|verify|repair DIR`, `cast wal export DIR OUT`", run: runWal})
}

// walOut is where cast wal writes; tests swap it.
var walOut io.Writer = os.Stdout

const walUsage = `usage: cast wal stat [-stream N] DIR           segments, seq range, records, bytes, index state, damage
       cast wal dump [-json] [-stream N] DIR    one line per record: seq, type, len, crc ok (JSON lines with -json)
       cast wal verify [-stream N] DIR          check every frame, name, continuity and zero tail; list every
                                                damaged place; exit 1 naming the first bad file, offset and seq;
                                                exit 4 when the records are whole and only segment names are
                                                wrong ("mislabelled", as the reference writer leaves them)
       cast wal repair [-stream N] DIR          rename mislabelled segments to what they hold (undo record in
                                                relabel-<time>/); move damaged records to a quarantine directory
                                                with a report and put Skip markers in their place, so the log
                                                verifies and a writer can extend it again (the writer must not
                                                be running)
       cast wal export [-stream N] DIR OUT      copy the log to OUT/<sid>/ as a reference reader expects it:
                                                segments only, the active one cut to its data (no zero tail)

DIR is a stream directory (holding <sid>_*.wal files) or a WAL root holding
one directory per stream (<root>/<sid>/).`

// exitMislabelled is cast wal verify's status for a log whose records are
// whole but whose sealed segment names are wrong (cast wal repair renames
// them); damage anywhere makes it exit 1 instead.
const exitMislabelled = 4

func runWal(args []string) error {
	if len(args) == 0 || args[0] == "-h" || args[0] == "--help" {
		fmt.Fprintln(os.Stderr, walUsage)
		if len(args) == 0 {
			return usagef("want a subcommand: stat, dump, verify, repair or export")
		}
		return nil
	}
	switch args[0] {
	case "stat":
		return walStat(args[1:])
	case "dump":
		return walDump(args[1:])
	case "verify":
		return walVerify(args[1:])
	case "repair":
		return walRepair(args[1:])
	case "export":
		return walExport(args[1:])
	}
	fmt.Fprintln(os.Stderr, walUsage)
	return usagef("unknown subcommand %q", args[0])
}

// walStream is one stream directory found under the DIR argument.
type walStream struct {
	dir    string
	stream uint32
}

// walStreams resolves DIR: a stream directory itself, or a root with one
// numeric subdirectory per stream. only >= 0 selects one stream.
func walStreams(dir string, only int64) ([]walStream, error) {
	var out []walStream
	ids, err := wal.Streams(dir)
	if err != nil {
		return nil, err
	}
	for _, id := range ids {
		out = append(out, walStream{dir, id})
	}
	if len(out) == 0 {
		ents, err := os.ReadDir(dir)
		if err != nil {
			return nil, err
		}
		var subErr error
		for _, e := range ents {
			if !e.IsDir() {
				continue
			}
			id, err := strconv.ParseUint(e.Name(), 10, 32)
			if err != nil {
				continue
			}
			sub := filepath.Join(dir, e.Name())
			ids, err := wal.Streams(sub)
			if err != nil {
				subErr = errors.Join(subErr, err) // say so: "no segments" would hide it
				continue
			}
			for _, s := range ids {
				if uint64(s) == id {
					out = append(out, walStream{sub, s})
				}
			}
		}
		if subErr != nil {
			return out, subErr
		}
	}
	if only >= 0 {
		var sel []walStream
		for _, s := range out {
			if int64(s.stream) == only {
				sel = append(sel, s)
			}
		}
		out = sel
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("no WAL segments in %s", dir)
	}
	return out, nil
}

// walArgs parses a wal subcommand's flags (-stream and what extra adds)
// and resolves its DIR argument to the streams to work on.
func walArgs(name, synopsis, about string, args []string, extra func(*flag.FlagSet)) ([]walStream, error) {
	fs := newFlagSet("wal "+name, synopsis, about)
	stream := fs.Int64("stream", -1, "only this stream id (default: every stream found)")
	if extra != nil {
		extra(fs)
	}
	if err := parseArgs(fs, args, 1); err != nil {
		return nil, err
	}
	return walStreams(fs.Arg(0), *stream)
}

func walStat(args []string) error {
	streams, err := walArgs("stat", "[flags] DIR", "Prints each stream's segments: seq range, records, bytes and index state.", args, nil)
	if err != nil {
		return err
	}
	for _, s := range streams {
		rep, err := wal.Verify(s.dir, s.stream)
		if err != nil {
			return err
		}
		fmt.Fprintf(walOut, "stream %d  dir %s  records %d  seqs %d…%d  segments %d",
			s.stream, s.dir, rep.Records, rep.First, rep.Last, len(rep.Segments))
		if len(rep.Damage) > 0 {
			fmt.Fprintf(walOut, "  DAMAGED in %d places (the last good seq is %d; `cast wal repair` quarantines the damage)", len(rep.Damage), rep.Last)
		}
		if len(rep.Mislabelled) > 0 {
			fmt.Fprintf(walOut, "  MISLABELLED: %d segment names do not match their records (`cast wal repair` renames them)", len(rep.Mislabelled))
		}
		fmt.Fprintln(walOut)
		printFindings(rep)
		for _, sg := range rep.Segments {
			kind := "sealed"
			if sg.Active {
				kind = "active"
			}
			fmt.Fprintf(walOut, "  %-6s %-28s seqs %d…%d  records %d  data %d B  file %d B  index %s",
				kind, filepath.Base(sg.Path), sg.First, sg.Last, sg.Records, sg.Bytes, sg.FileSize, sg.Index)
			if sg.Truthful != "" {
				fmt.Fprintf(walOut, "  MISLABELLED: holds seqs %d…%d, truthful name %s", sg.First, sg.Last, sg.Truthful)
			}
			if sg.Problem != "" {
				fmt.Fprintf(walOut, "  PROBLEM: %s", sg.Problem)
			}
			fmt.Fprintln(walOut)
		}
	}
	return nil
}

type dumpRecord struct {
	Stream uint32 `json:"stream"`
	File   string `json:"file"`
	Off    int64  `json:"off"`
	Seq    uint64 `json:"seq"`
	Type   uint16 `json:"type"`
	Len    uint16 `json:"len"`
	CRCOK  bool   `json:"crc_ok"`
	// Unreadable: bytes before this record that are no frame (stepped
	// over as verify does).
	Unreadable int64 `json:"unreadable,omitempty"`
}

func walDump(args []string) error {
	var asJSON *bool
	streams, err := walArgs("dump", "[flags] DIR", "Prints one line per record in file order: seq, type, payload length, whether the CRC matches.\nBytes that are no frame are stepped over as verify does (an \"unreadable: N bytes\" line); so\nthe records with crc ok are the records stat and verify count.", args,
		func(fs *flag.FlagSet) { asJSON = fs.Bool("json", false, "one JSON object per line") })
	if err != nil {
		return err
	}
	enc := json.NewEncoder(walOut)
	for _, s := range streams {
		files, err := wal.ListSegments(s.dir, s.stream)
		if err != nil {
			return err
		}
		for _, sf := range files {
			base := filepath.Base(sf.Path)
			var werr error
			err := wal.ScanSegment(sf.Path, func(r wal.ScannedRecord) bool {
				if *asJSON {
					werr = enc.Encode(dumpRecord{s.stream, base, r.Off, r.Seq, r.Type, r.Len, r.CRCOK, r.Unreadable})
				} else {
					if r.Unreadable > 0 {
						fmt.Fprintf(walOut, "unreadable: %d bytes  (%s @%d)\n", r.Unreadable, base, r.Off-r.Unreadable)
					}
					crc := "ok"
					if !r.CRCOK {
						crc = "BAD"
					}
					_, werr = fmt.Fprintf(walOut, "seq %d type %d len %d crc %s  (%s @%d)\n", r.Seq, r.Type, r.Len, crc, base, r.Off)
				}
				return werr == nil
			})
			if werr != nil {
				return werr
			}
			if err != nil {
				if *asJSON {
					enc.Encode(map[string]string{"file": base, "error": err.Error()})
				} else {
					fmt.Fprintf(walOut, "error: %v\n", err)
				}
			}
		}
	}
	return nil
}

func walVerify(args []string) error {
	streams, err := walArgs("verify", "[flags] DIR", "Checks every frame (version, len, CRC, seq), that sealed names tell the truth,\nthat segments continue each other and that the active segment is zero after its\nlast record. Exits 1 naming the first bad file and byte offset. Exits 4 when\nnothing is damaged but sealed segments are mislabelled: their records are whole\nand continue each other, only the names give other seqs (the reference writer\nnames a segment sealed before a write one flush batch too far); `cast wal\nrepair` renames them.", args, nil)
	if err != nil {
		return err
	}
	var firstBad, firstMislabel error
	for _, s := range streams {
		rep, err := wal.Verify(s.dir, s.stream)
		if err != nil {
			return err
		}
		if rep.Bad != nil && len(rep.Damage) == 0 && errors.Is(rep.Bad, wal.ErrMislabelled) {
			fmt.Fprintf(walOut, "stream %d: mislabelled: %d records, seqs %d…%d in %d segments, none damaged; %d segment names do not match their records\n",
				s.stream, rep.Records, rep.First, rep.Last, len(rep.Segments), len(rep.Mislabelled))
			printFindings(rep)
			if firstMislabel == nil {
				firstMislabel = rep.Bad
			}
			continue
		}
		if rep.Bad != nil {
			fmt.Fprintf(walOut, "stream %d: BAD: %v\n", s.stream, rep.Bad)
			printFindings(rep)
			if firstBad == nil {
				firstBad = rep.Bad
			}
			continue
		}
		fmt.Fprintf(walOut, "stream %d: ok, %d records, seqs %d…%d in %d segments", s.stream, rep.Records, rep.First, rep.Last, len(rep.Segments))
		if len(rep.Skips) > 0 {
			fmt.Fprintf(walOut, ", %d Skip markers", len(rep.Skips))
		}
		fmt.Fprintln(walOut)
		printFindings(rep)
	}
	if firstBad != nil {
		return failf("%v", firstBad)
	}
	if firstMislabel != nil {
		return &exitError{code: exitMislabelled, msg: firstMislabel.Error()}
	}
	return nil
}

// printFindings lists what Verify found besides the segments: each damaged
// place, each Skip marker, unknown files, orphan indexes.
func printFindings(rep wal.VerifyReport) {
	for _, m := range rep.Mislabelled {
		fmt.Fprintf(walOut, "  mislabelled: %s\n", m)
	}
	for _, d := range rep.Damage {
		fmt.Fprintf(walOut, "  DAMAGE: %v\n", strings.TrimPrefix(d.Error(), "wal: damaged log: "))
	}
	for _, sk := range rep.Skips {
		why := "a writer restarted after a crash; those seqs were never durable"
		if sk.Reason == wire.SkipRepair {
			why = "repaired: the records were damaged and quarantined"
		}
		fmt.Fprintf(walOut, "  skip: seqs %d…%d have no record (%s)\n", sk.From, sk.Seq, why)
	}
	for _, u := range rep.Unknown {
		fmt.Fprintf(walOut, "  unknown file: %s (not a segment of stream %d)\n", u, rep.Stream)
	}
	for _, o := range rep.OrphanIndexes {
		fmt.Fprintf(walOut, "  orphan index: %s (its segment is gone; the writer removes it)\n", o)
	}
}

func walRepair(args []string) error {
	streams, err := walArgs("repair", "[flags] DIR", "Renames mislabelled segments to the seqs their records hold (no record moves;\nthe renames are kept in DIR/<sid>/relabel-<time>/undo.json and undo.sh). Then\nmoves every damaged record (and every seq range no segment holds) out of the log:\nthe original files, the damaged bytes and a report (report.txt, report.json) go to\nDIR/<sid>/quarantine-<time>/, and a Skip marker takes the place of each damaged\nstretch, so the log verifies and a writer extends it again. Good records are kept\nbyte for byte. The stream's writer must not be running.", args, nil)
	if err != nil {
		return err
	}
	for _, s := range streams {
		rep, err := wal.Repair(s.dir, s.stream)
		if err != nil {
			return err
		}
		fmt.Fprint(walOut, rep.Text())
	}
	return nil
}

func walExport(args []string) error {
	fs := newFlagSet("wal export", "[flags] DIR OUT", "Copies each stream's log to OUT/<sid>/ as the reference's tools read it to a clean\nend: segment files only (no index, lock or reservation file), sealed segments byte\nfor byte under truthful names, the active segment cut to its last record (walcast\npreallocates it and a strict sequential reader stops at the zeros). DIR is left as\nit is. Refuses a damaged log (`cast wal repair` first) and an OUT/<sid>/ that\nalready holds segments.")
	stream := fs.Int64("stream", -1, "only this stream id (default: every stream found)")
	if err := parseArgs(fs, args, 2); err != nil {
		return err
	}
	streams, err := walStreams(fs.Arg(0), *stream)
	if err != nil {
		return err
	}
	for _, s := range streams {
		rep, err := wal.Export(s.dir, s.stream, fs.Arg(1))
		if err != nil {
			return failf("%v", err)
		}
		fmt.Fprintf(walOut, "stream %d: exported %d records, seqs %d…%d, %d bytes in %d files to %s\n",
			s.stream, rep.Records, rep.First, rep.Last, rep.Bytes, len(rep.Files), rep.Dir)
	}
	return nil
}
