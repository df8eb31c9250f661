"""The core must run on Android minSdk 26 unchanged (it is the app's code, compiled here with javac): no JDK
API that Android 8.0 lacks may appear in android-demo/core/src/main (the JVM-only StdioDevice excepted).
A textual guard — javac --release 11 does not know Android's API levels, and no android.jar exists here."""
from __future__ import annotations

import re

from .conftest import CORE

JVM_ONLY = {"StdioDevice.java"}
# API -> why it is out: each is above API 26 on Android, or absent there altogether
FORBIDDEN = {
    r"\bjava\.nio\.file\b": "java.nio.file (the core uses java.io; the app may use it)",
    r"\bjava\.lang\.management\b": "java.lang.management (not on Android)",
    r"\bHexFormat\b": "java.util.HexFormat (Java 17; Android API 34)",
    r"\.repeat\(": "String.repeat (Java 11; Android API 33)",
    r"\bMath\.multiplyHigh\b": "Math.multiplyHigh (Android API 31)",
    r"\b(List|Set|Map)\.(of|copyOf)\(": "immutable collection factories (Java 9; Android API 30)",
    r"\.(isBlank|strip|lines)\(\)": "Java 11 String methods (Android API 33)",
    r"\.readAllBytes\(|\.transferTo\(": "InputStream.readAllBytes/transferTo (Android API 33)",
    r"\bjavax\.xml\b": "javax.xml (the app parses GPX with XmlPullParser)",
}


def test_core_uses_only_apis_of_android_minsdk_26():
    sources = [p for p in (CORE / "src" / "main").rglob("*.java") if p.name not in JVM_ONLY]
    assert len(sources) > 20
    found = []
    for path in sources:
        for n, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
            code = re.sub(r"/\*.*?(\*/|$)", "", line.split("//")[0])     # comments name APIs to avoid
            if code.lstrip().startswith("*"):
                continue
            for pattern, why in FORBIDDEN.items():
                if re.search(pattern, code):
                    found.append(f"{path.relative_to(CORE)}:{n}: {why}")
    assert not found, "\n".join(found)
