"""The Python names a TensorRT bindings wheel registers, read from the wheel without importing it.

`tensorrt.so` needs libnvinfer to import, which these machines cannot install; but it is a pybind11
module, and every name it registers (class, method, property, enum member, module function) reaches
pybind11 as a `const char*` loaded with a RIP-relative `lea` from `.rodata`. The wheels ship no
`.pyi` stubs. This script reads the ELF file with the standard library only:

- the flat name set: every identifier-shaped C string the machine code loads. A superset of the
  registered names (argument names, pybind11's own `__members__`, `name`, ...), which only makes a
  check a little lenient. The linker merges string tails ("Logger" lives inside "ILogger"), so a
  string is read from the address the code loads, never split out of the section;
- the members of each enum: the name (%rsi) at each call of `pybind11::enum_<E>::value`, E from the
  callee's mangled symbol (the symbol table is not stripped); a `value` inlined into a bind function
  belongs to the enum whose constructor ran last there. The Python enum name comes from the
  constructor of `enum_<E>` (it can differ: nvinfer1::ErrorCode is `ErrorCodeTRT`). An enum with a
  member whose name could not be resolved is written `Enum.*`;
- the names `tensorrt_bindings/__init__.py` adds (`__version__`, `nptype`, `Logger.Severity`, ...).

Methods and properties are not attributed to classes: identical-code folding leaves one symbol,
`class_<IExecutionContext>::def_property`, serving other classes too, so the mangled owner lies.

Usage (regenerates tests/data/trt_api/; the wheels are downloaded by pip, never committed):
    pip download --no-deps --only-binary=:all: --python-version 3.12 --platform manylinux_2_28_x86_64 \
        -d /tmp/trt tensorrt-cu12-bindings==10.16.1.11 tensorrt-cu13-bindings==11.4.0.106
    python benchmarks/trt_api_names.py /tmp/trt/*.whl --out tests/data/trt_api
"""

from __future__ import annotations

import argparse
import ast
import bisect
import hashlib
import re
import struct
import sys
import zipfile
from dataclasses import dataclass, field
from pathlib import Path

IDENTIFIER = re.compile(rb"[A-Za-z_][A-Za-z0-9_]{0,79}")
RTTI_NAME = re.compile(r"(?:N|St|P?Fv?P?N)\d\w*E")  # typeid(T).name() strings pybind11 loads: N8nvinfer111ICudaEngineE
# lea disp32(%rip), r64: REX.W (R and B bits free), 8D, ModRM with mod=00 rm=101
LEA_RIP = re.compile(rb"(?=([\x48\x49\x4c\x4d])\x8d([\x05\x0d\x15\x1d\x25\x2d\x35\x3d]))", re.DOTALL)
CALL_REL32 = re.compile(rb"(?=\xe8)", re.DOTALL)
RSI, RDX = 6, 2
STT_FUNC = 2
ENUM_BASE_VALUE = "_ZN8pybind116detail9enum_base5valueE"
ENUM_SYMBOL = re.compile(r"_ZN8pybind115enum_I")
CPP_NAMESPACES = {"nvinfer1", "v_1_0", "nvonnxparser", "tensorrt"}


@dataclass(frozen=True)
class Section:
    name: str
    addr: int
    offset: int
    size: int
    link: int
    entsize: int

    def holds(self, addr: int) -> bool:
        return self.addr <= addr < self.addr + self.size


class Elf:
    def __init__(self, data: bytes):
        if data[:4] != b"\x7fELF" or data[4] != 2 or data[5] != 1 or struct.unpack_from("<H", data, 18)[0] != 62:
            raise ValueError("not a little-endian x86-64 ELF64 file")
        self.data = data
        shoff, = struct.unpack_from("<Q", data, 0x28)
        shentsize, shnum, shstrndx = struct.unpack_from("<HHH", data, 0x3A)
        raw = [struct.unpack_from("<IIQQQQIIQQ", data, shoff + i * shentsize) for i in range(shnum)]
        names = raw[shstrndx][4]
        self.sections = [
            Section(self._cstr(names + r[0]).decode(), r[3], r[4], r[5], r[6], r[9]) for r in raw
        ]
        self.by_name = {s.name: s for s in self.sections}

    def _cstr(self, offset: int) -> bytes:
        return self.data[offset:self.data.index(b"\0", offset)]

    def section(self, name: str) -> Section:
        if name not in self.by_name:
            raise ValueError(f"no {name} section (a stripped or unusual build?)")
        return self.by_name[name]

    def identifier_at(self, addr: int, rodata: Section) -> str | None:
        """The C string at a `.rodata` address, if it is an identifier."""
        if not rodata.holds(addr):
            return None
        offset = rodata.offset + addr - rodata.addr
        match = IDENTIFIER.match(self.data, offset)
        if match is None or self.data[match.end()] != 0:
            return None
        return match.group().decode()

    def functions(self) -> dict[int, list[str]]:
        """Function start address -> the names of the symbols there."""
        symtab = self.section(".symtab")
        strtab = self.sections[symtab.link]
        starts: dict[int, list[str]] = {}
        for offset in range(symtab.offset, symtab.offset + symtab.size, symtab.entsize):
            name, info, _, _, value, _ = struct.unpack_from("<IBBHQQ", self.data, offset)
            if info & 0xF == STT_FUNC and value:
                starts.setdefault(value, []).append(self._cstr(strtab.offset + name).decode())
        return starts


@dataclass
class Lea:
    addr: int
    reg: int
    name: str


@dataclass
class Call:
    addr: int
    target: int
    rsi: str | None  # the identifier loaded into %rsi since the previous call, if any
    rdx: str | None


@dataclass
class EnumInfo:
    python_name: str | None = None
    members: set[str] = field(default_factory=set)
    complete: bool = True


def scan_text(elf: Elf, functions: dict[int, list[str]]) -> tuple[list[Lea], list[Call]]:
    """Identifier-loading `lea`s and direct calls in `.text`, in address order.

    A byte scan, not a disassembly: a false match would have to land exactly on an identifier
    in `.rodata` (lea) or on a function start (call), which the checks below require.
    """
    text, rodata = elf.section(".text"), elf.section(".rodata")
    plt = [s for s in elf.sections if s.name.startswith(".plt")]
    code = elf.data[text.offset:text.offset + text.size]
    leas = []
    for match in LEA_RIP.finditer(code):
        i = match.start()
        rex, modrm = code[i], code[i + 2]
        disp, = struct.unpack_from("<i", code, i + 3)
        name = elf.identifier_at(text.addr + i + 7 + disp, rodata)
        if name is not None:
            leas.append(Lea(text.addr + i, ((rex >> 2) & 1) << 3 | (modrm >> 3) & 7, name))
    calls = []
    for match in CALL_REL32.finditer(code):
        i = match.start()
        if i + 5 > len(code):
            continue
        disp, = struct.unpack_from("<i", code, i + 1)
        target = text.addr + i + 5 + disp
        if target in functions or any(s.holds(target) for s in plt):
            calls.append(Call(text.addr + i, target, None, None))
    # the argument registers at each call: the last lea into them after the previous call
    lea_addrs = [lea.addr for lea in leas]
    previous = 0
    for call in calls:
        lo, hi = bisect.bisect_right(lea_addrs, previous), bisect.bisect_left(lea_addrs, call.addr)
        for lea in leas[lo:hi]:
            if lea.reg == RSI:
                call.rsi = lea.name
            elif lea.reg == RDX:
                call.rdx = lea.name
        previous = call.addr
    return leas, calls


def base_symbol(name: str) -> str:
    return name.split(".", 1)[0]  # drop .constprop.0 / .isra.0 / .lto_priv.0 / .cold


def parse_source_name(mangled: str, i: int) -> tuple[str, int]:
    digits = re.match(r"\d+", mangled[i:])
    if digits is None:
        raise ValueError(mangled)
    start = i + len(digits.group())
    end = start + int(digits.group())
    return mangled[start:end], end


def enum_symbol(mangled: str) -> tuple[str, str] | None:
    """('nvinfer1::ILogger::Severity', 'value' | 'ctor') for pybind11::enum_<E>::value / enum_<E>::enum_."""
    mangled = base_symbol(mangled)
    match = ENUM_SYMBOL.match(mangled)
    if match is None:
        return None
    i = match.end()
    parts = []
    try:
        if mangled[i] == "N":
            i += 1
            while mangled[i] != "E":
                part, i = parse_source_name(mangled, i)
                parts.append(part)
            i += 1
        else:
            part, i = parse_source_name(mangled, i)
            parts.append(part)
    except (ValueError, IndexError):
        return None
    if not mangled[i:].startswith("E"):  # more template arguments: not a plain enum_<E>
        return None
    rest = mangled[i + 1:]
    if rest.startswith("5valueE"):
        return "::".join(parts), "value"
    if re.match(r"C[124]", rest):
        return "::".join(parts), "ctor"
    return None


def owner_of(functions: dict[int, list[str]], addr: int) -> tuple[str, str] | None:
    """The enum symbol named at a function start; None when absent or ambiguous (folded code)."""
    owners = {enum_symbol(name) for name in functions.get(addr, [])} - {None}
    return owners.pop() if len(owners) == 1 else None


def enums_from(elf: Elf, functions: dict[int, list[str]], leas: list[Lea], calls: list[Call]) -> dict[str, EnumInfo]:
    enums: dict[str, EnumInfo] = {}
    starts = sorted(functions)

    def containing(addr: int) -> int:
        return starts[bisect.bisect_right(starts, addr) - 1]

    lea_addrs = [lea.addr for lea in leas]

    def identifiers_in(function: int) -> set[str]:
        end = starts[bisect.bisect_right(starts, function)] if function != starts[-1] else function + (1 << 20)
        return {lea.name for lea in leas[bisect.bisect_left(lea_addrs, function):bisect.bisect_left(lea_addrs, end)]}

    # value() bodies whose name argument was specialised in (a constprop clone): the name sits inside
    baked: dict[int, str] = {}
    for call in calls:
        if base_symbol(functions.get(call.target, [""])[0]).startswith(ENUM_BASE_VALUE) and call.rsi:
            owner = owner_of(functions, containing(call.addr))
            if owner and owner[1] == "value":
                baked[containing(call.addr)] = call.rsi
                enums.setdefault(owner[0], EnumInfo()).members.add(call.rsi)

    # (function, kind, enum, name) in address order; kind: ctor | value | inlined (enum_<E>::value
    # inlined into a bind function: its enum is the one whose constructor ran last there)
    events: list[tuple[int, str, str | None, str | None]] = []
    ctor_names: dict[str, set[str]] = {}
    for call in calls:
        owner = owner_of(functions, call.target)
        if owner is not None:
            cpp, kind = owner
            enums.setdefault(cpp, EnumInfo())
            if kind == "ctor":
                ctor_names[cpp] = {call.rdx} if call.rdx else identifiers_in(call.target)
                events.append((containing(call.addr), "ctor", cpp, None))
            elif call.target not in baked:
                events.append((containing(call.addr), "value", cpp, call.rsi))
        elif base_symbol(functions.get(call.target, [""])[0]).startswith(ENUM_BASE_VALUE):
            function = containing(call.addr)
            if owner_of(functions, function) is None:
                events.append((function, "inlined", None, call.rsi))

    # a constructor with the name specialised in also references pybind11's own names (__int__, ...),
    # the same in every such constructor: what is left is the enum's Python name
    specialised = [names for names in ctor_names.values() if len(names) > 1]
    pybind11_own = set.intersection(*specialised) if len(specialised) > 1 else set()
    for cpp, names in ctor_names.items():
        own = names - pybind11_own
        enums[cpp].python_name = own.pop() if len(own) == 1 else None

    current: dict[int, str | None] = {}  # function -> the enum being defined there
    for index, (function, kind, cpp, name) in enumerate(events):
        if kind == "ctor":
            current[function] = cpp
            continue
        if kind == "value" and current.get(function) != cpp:
            current[function] = None  # a constructor we did not see: stop attributing inlined calls
        if kind == "inlined":
            cpp = current.get(function)
            if cpp is None:  # whose member it is is unknown: the enums around it may be incomplete
                around = [e[2] for e in (*events[index - 1:index], *events[index + 1:index + 2]) if e[0] == function]
                for neighbour in around:
                    if neighbour:
                        enums[neighbour].complete = False
                continue
        if name is None:
            enums[cpp].complete = False
        else:
            enums[cpp].members.add(name)
    return enums


def python_enum_names(enums: dict[str, EnumInfo]) -> dict[str, EnumInfo]:
    """C++ enum -> its Python qualified name (`ILogger.Severity`); enums whose name is unknown are left out."""
    named = {}
    for cpp, info in enums.items():
        if info.python_name is None:
            continue
        scope = [part for part in cpp.split("::")[:-1] if part not in CPP_NAMESPACES]
        named[".".join([*scope, info.python_name])] = info
    return named


def init_names(source: str, enums: dict[str, EnumInfo]) -> set[str]:
    """Names `tensorrt_bindings/__init__.py` defines; aliases of enums join `enums`."""
    names = set()
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, (ast.FunctionDef, ast.ClassDef)):
            names.add(node.name)
        elif isinstance(node, ast.Assign):
            for target in node.targets:
                if isinstance(target, ast.Name):
                    names.add(target.id)
                elif isinstance(target, ast.Attribute):
                    names.add(target.attr)
                    alias = ast.unparse(node.value)
                    if alias in enums:
                        enums[ast.unparse(target)] = enums[alias]
    return names


@dataclass
class WheelNames:
    wheel: str
    sha256: str
    version: str
    flat: set[str]
    enums: dict[str, EnumInfo]

    def lines(self) -> list[str]:
        entries = set(self.flat)
        for enum, info in self.enums.items():
            entries |= {f"{enum}.{member}" for member in info.members} if info.complete else {f"{enum}.*"}
        return [
            f"# {self.wheel} sha256={self.sha256} tensorrt {self.version}, by benchmarks/trt_api_names.py",
            "# Enum.MEMBER: an enum's members; Enum.*: members not all extracted;",
            "# other lines: every identifier the bindings load (registered names, argument names, pybind11's own)",
            *sorted(entries),
        ]


def extract(wheel: Path) -> WheelNames:
    blob = wheel.read_bytes()
    with zipfile.ZipFile(wheel) as archive:
        members = archive.namelist()
        so = next(n for n in members if re.search(r"(^|/)tensorrt[^/]*\.so$", n) and "plugin" not in n)
        init = str(Path(so).parent / "__init__.py")
        data, init_source = archive.read(so), archive.read(init).decode()
    elf = Elf(data)
    functions = elf.functions()
    leas, calls = scan_text(elf, functions)
    flat = {lea.name for lea in leas if not RTTI_NAME.fullmatch(lea.name)}
    enums = python_enum_names(enums_from(elf, functions, leas, calls))
    flat |= init_names(init_source, enums)
    version = re.search(r'__version__\s*=\s*"([^"]+)"', init_source)
    return WheelNames(wheel.name, hashlib.sha256(blob).hexdigest(), version.group(1) if version else "?", flat, enums)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("wheels", nargs="+", type=Path, help="tensorrt-cu*-bindings wheels")
    parser.add_argument("--out", type=Path, help="write tensorrt-<version>.txt here (default: print)")
    args = parser.parse_args(argv)
    for wheel in args.wheels:
        names = extract(wheel)
        text = "\n".join(names.lines()) + "\n"
        if args.out is None:
            sys.stdout.write(text)
            continue
        args.out.mkdir(parents=True, exist_ok=True)
        path = args.out / f"tensorrt-{names.version}.txt"
        path.write_text(text)
        partial = sorted(e for e, i in names.enums.items() if not i.complete)
        print(f"{path}: {len(names.flat)} names, {len(names.enums)} enums, partial: {', '.join(partial) or 'none'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
