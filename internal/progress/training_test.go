package progress

import (
	"bytes"
	"testing"
)

// The bar redraws in place and steps aside for event and epoch lines.
func TestTrainingBar(t *testing.T) {
	var w bytes.Buffer
	b := NewTraining(&w)
	b.Line("posted job %d", 1)
	b.Step(5, 10)
	b.Step(10, 10)
	b.Epoch("epoch 1/1 loss 1.0000 val 0.0000")
	b.Step(11, 10) // out of range: ignored
	b.Step(3, 10)
	b.End()
	want := "posted job 1\n\rtraining [##########          ]  50%  step 5/10\rtraining [####################] 100%  step 10/10\nepoch 1/1 loss 1.0000 val 0.0000\n" +
		"\rtraining [######              ]  30%  step 3/10\n"
	if w.String() != want {
		t.Fatalf("got %q\nwant %q", w.String(), want)
	}
}
