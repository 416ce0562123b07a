"""Python twin of camagent's test-pattern counter decoder and a Y4M reader.

Barcode layout (Sources/PixelConversion/TestPattern/TestPatternRenderer.swift):
a band across the top of the luma plane, max(16, height // 12) rows tall,
split into 40 cells; white (Y > 128) is 1. Cells 0-3 are the guard 1,0,1,0,
cells 4-35 the 32-bit counter (most significant bit first), cells 36-39 a check
nibble: the XOR of the counter's eight nibbles.
"""
import numpy as np

CELLS = 40


def band_height(height):
    return max(16, height // 12)


def check_nibble(counter):
    x = 0
    for i in range(8):
        x ^= (counter >> (4 * i)) & 0xF
    return x


def decode_counter(y):
    """The counter in a luma plane (2-D uint8 array), or None."""
    height, width = y.shape
    band = band_height(height)
    value = 0
    for cell in range(CELLS):
        x0, x1 = cell * width // CELLS, (cell + 1) * width // CELLS
        w = x1 - x0
        a, b = x0 + w // 4, max(x1 - w // 4, x0 + w // 4 + 1)
        mean = y[band // 4: band - band // 4, a:b].mean()
        value = (value << 1) | (1 if mean > 128 else 0)
    guard, counter, check = value >> 36, (value >> 4) & 0xFFFFFFFF, value & 0xF
    if guard != 0b1010 or check != check_nibble(counter):
        return None
    return counter


def read_y4m(path):
    """Frames of a 4:2:0 Y4M file as (y, u, v) uint8 arrays."""
    data = open(path, "rb").read()
    header, rest = data.split(b"\n", 1)
    fields = {f[:1]: f[1:] for f in header.split(b" ")[1:]}
    w, h = int(fields[b"W"]), int(fields[b"H"])
    cw, ch = (w + 1) // 2, (h + 1) // 2
    size = w * h + 2 * cw * ch
    frames = []
    pos = 0
    while rest.startswith(b"FRAME", pos):
        pos = rest.index(b"\n", pos) + 1
        buf = np.frombuffer(rest[pos:pos + size], dtype=np.uint8)
        frames.append((buf[:w * h].reshape(h, w), buf[w * h:w * h + cw * ch].reshape(ch, cw),
                       buf[w * h + cw * ch:].reshape(ch, cw)))
        pos += size
    return frames


def psnr(a, b):
    mse = np.mean((a.astype(np.float64) - b.astype(np.float64)) ** 2)
    return 99.0 if mse == 0 else 10 * np.log10(255.0 ** 2 / mse)
