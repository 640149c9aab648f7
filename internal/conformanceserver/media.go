package conformanceserver

import (
	"bytes"
	"encoding/base64"
	"encoding/binary"
	"image"
	"image/color"
	"image/png"
)

// The image and audio payloads are generated rather than pasted as opaque base64 so that a reader
// can see they are real files (a client may decode them): a 1x1 red PNG and a short silent WAV.
var (
	redPixelPNG = base64.StdEncoding.EncodeToString(encodeRedPixelPNG())
	silentWAV   = base64.StdEncoding.EncodeToString(encodeSilentWAV(8000, 80))
)

func encodeRedPixelPNG() []byte {
	img := image.NewRGBA(image.Rect(0, 0, 1, 1))
	img.Set(0, 0, color.RGBA{R: 255, A: 255})
	var buf bytes.Buffer
	if err := png.Encode(&buf, img); err != nil {
		panic(err) // encoding an in-memory 1x1 image cannot fail
	}
	return buf.Bytes()
}

// encodeSilentWAV returns a mono 16-bit PCM WAV file of n zero samples at rate Hz.
func encodeSilentWAV(rate, n uint32) []byte {
	const channels, bits = 1, 16
	dataLen := n * channels * bits / 8
	var buf bytes.Buffer
	put := func(v any) { _ = binary.Write(&buf, binary.LittleEndian, v) } // bytes.Buffer never fails
	buf.WriteString("RIFF")
	put(36 + dataLen)
	buf.WriteString("WAVEfmt ")
	put(uint32(16)) // fmt chunk size
	put(uint16(1))  // PCM
	put(uint16(channels))
	put(rate)
	put(rate * channels * bits / 8)  // byte rate
	put(uint16(channels * bits / 8)) // block align
	put(uint16(bits))
	buf.WriteString("data")
	put(dataLen)
	buf.Write(make([]byte, dataLen))
	return buf.Bytes()
}
