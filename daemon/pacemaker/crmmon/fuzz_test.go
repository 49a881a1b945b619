package crmmon

import (
	"os"
	"path/filepath"
	"testing"
	"time"
)

// FuzzParse feeds arbitrary bytes to the parser, seeded with every fixture.
// The parser must never panic, must return either a document or an error,
// and must give the same answer twice (it keeps no state).
func FuzzParse(f *testing.F) {
	files, err := filepath.Glob(filepath.Join(fixtures, "*.xml"))
	if err != nil || len(files) == 0 {
		// Without the real documents as seeds the fuzzer starts from
		// nothing and the seed run proves nothing.
		f.Fatalf("no seed fixtures in %s (%v); run ../testdata/generate.sh", fixtures, err)
	}
	for _, name := range files {
		data, err := os.ReadFile(name)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(data)
	}
	f.Add([]byte(`<pacemaker-result><resources><bundle id="b"><replica id="0"><resource id="r"/></replica></bundle></resources></pacemaker-result>`))
	f.Add([]byte(`<crm_mon version="2.0.0"><summary/><nodes/></crm_mon>`))
	f.Fuzz(func(t *testing.T, data []byte) {
		doc, err := Parse(data, time.UTC)
		if (doc == nil) == (err == nil) {
			t.Fatalf("Parse returned doc %v and error %v", doc != nil, err)
		}
		if err != nil {
			return
		}
		_ = Check(doc, 0)
		again, err := Parse(data, time.UTC)
		if err != nil || len(again.Resources) != len(doc.Resources) || len(again.Nodes) != len(doc.Nodes) || len(again.Warnings) != len(doc.Warnings) {
			t.Fatalf("second parse differs: %v", err)
		}
	})
}
