#!/usr/bin/env python3
"""Writes the UserData of cloudformation/spotguard-training.yaml from
scripts/user-data.sh, so that the stack boots exactly the script the test
suite rehearses.

The generated user data is the script itself with a block after its first
line that writes /etc/spotguard/bootstrap.env from the stack's parameters;
the script reads that file. It goes through Fn::Sub, so every "${" of the
script is written "${!" (Fn::Sub turns "${!x}" back into "${x}"), and the
parameters are substituted in the bootstrap.env block only.

    scripts/gen-template.py           rewrite the template's UserData
    scripts/gen-template.py --check   exit 1 with a diff if the committed
                                      template differs from the generated one
    scripts/gen-template.py --render  print the user data an instance gets,
                                      as CloudFormation renders it, with
                                      example parameter values
    --template FILE                   another template (tests)
"""
import difflib
import pathlib
import re
import sys

ROOT = pathlib.Path(__file__).resolve().parent.parent
SCRIPT = ROOT / "scripts" / "user-data.sh"
TEMPLATE = ROOT / "cloudformation" / "spotguard-training.yaml"
USER_DATA_KEY = "        UserData:"
INDENT = " " * 14  # the literal block's lines, below "- |"
USER_DATA_LIMIT = 16384  # EC2's limit on user data before base64

# bootstrap.env as the stack writes it: KEY=value lines, sourced by the
# script. The JSON arrays go in single quotes (the template's parameters do
# not allow a single quote in them).
BOOTSTRAP_ENV = """\
# Written by the CloudFormation stack's user data (scripts/gen-template.py);
# the rest of this user data is scripts/user-data.sh.
mkdir -p /etc/spotguard
cat > /etc/spotguard/bootstrap.env << 'BOOTSTRAP_ENV'
JOB=${JobName}
STORE=s3://${BucketName}/spotguard
REGION=${AWS::Region}
CHECKPOINT_DIR=${CheckpointDir}
PRESET=${Preset}
TRAINING_COMMAND='${TrainingCommand}'
RESUME_ARGS='${ResumeArgs}'
CHECKPOINT_SIGNAL=${CheckpointSignal}
UPLOAD_INTERVAL=${UploadInterval}
ON_COMPLETE=${OnComplete}
LIFECYCLE_HOOK=spotguard-drain
PACKAGE_URL=${PackageUrl}
NODES=${NodeCount}
GROUP_PORT=${TrainingPort}
BOOTSTRAP_ENV
"""


def user_data_block():
    script = SCRIPT.read_text()
    shebang, rest = script.split("\n", 1)
    if not shebang.startswith("#!"):
        sys.exit(f"gen-template: {SCRIPT} does not start with #!")
    nested = re.search(r"\$\{[^}]*\$\{", rest)
    if nested:
        sys.exit(f"gen-template: {SCRIPT} nests ${{...${{...}}}} ({nested.group(0)!r}), which Fn::Sub"
                 " cannot be trusted to pass through; write it another way")
    body = shebang + "\n" + BOOTSTRAP_ENV + rest.replace("${", "${!")
    if len(body.encode()) > USER_DATA_LIMIT:
        sys.exit(f"gen-template: the user data is {len(body.encode())} bytes, over EC2's {USER_DATA_LIMIT}")
    lines = [
        USER_DATA_KEY,
        "          # GENERATED from scripts/user-data.sh by scripts/gen-template.py: edit the",
        "          # script and run the generator; the test suite fails when they differ.",
        "          Fn::Base64: !Sub",
        "            - |",
    ]
    lines += [(INDENT + line) if line else "" for line in body.rstrip("\n").split("\n")]
    lines.append("            - BucketName: !If [CreateBucket, !Ref Bucket, !Ref ExistingBucket]")
    return lines


def generate(template):
    lines = template.split("\n")
    try:
        start = lines.index(USER_DATA_KEY)
    except ValueError:
        sys.exit(f"gen-template: no line {USER_DATA_KEY.strip()!r} in {TEMPLATE}")
    end = start + 1
    # The block ends at the next line indented no deeper than "UserData:".
    while end < len(lines) and (not lines[end].strip() or lines[end].startswith(" " * 9)):
        end += 1
    # Blank lines before the next key stay where they are.
    while end > start + 1 and not lines[end - 1].strip():
        end -= 1
    return "\n".join(lines[:start] + user_data_block() + lines[end:])


# Example values for --render.
EXAMPLE = {
    "JobName": "resnet", "BucketName": "my-bucket", "AWS::Region": "us-east-1",
    "CheckpointDir": "/data/ckpt", "Preset": "pytorch",
    "TrainingCommand": '["python3","/opt/train.py","--out","/data/ckpt"]',
    "ResumeArgs": '["--resume","{resume}"]', "CheckpointSignal": "SIGUSR1",
    "UploadInterval": "5m", "OnComplete": "scale-to-zero",
    "PackageUrl": "s3://my-bucket/spotguard-packages/0.1.0/",
    "NodeCount": "2", "TrainingPort": "29500",
}


def render(template):
    """The UserData of TEMPLATE as Fn::Sub renders it with EXAMPLE."""
    lines = template.split("\n")
    start = lines.index(USER_DATA_KEY)
    begin = lines.index("            - |", start) + 1
    end = next(i for i in range(begin, len(lines)) if lines[i].startswith("            - "))
    text = "\n".join(line[len(INDENT):] for line in lines[begin:end]) + "\n"

    def substitute(match):
        name = match.group(1)
        if name.startswith("!"):
            return "${" + name[1:] + "}"
        if name not in EXAMPLE:
            sys.exit(f"gen-template: no example value for ${{{name}}}")
        return EXAMPLE[name]
    return re.sub(r"\$\{([^}]*)\}", substitute, text)


def main():
    global TEMPLATE
    if "--template" in sys.argv:
        TEMPLATE = pathlib.Path(sys.argv[sys.argv.index("--template") + 1]).resolve()
    current = TEMPLATE.read_text()
    if "--render" in sys.argv[1:]:
        sys.stdout.write(render(current))
        return 0
    generated = generate(current)
    if "--check" in sys.argv[1:]:
        if current != generated:
            sys.stdout.writelines(difflib.unified_diff(
                current.splitlines(True), generated.splitlines(True),
                str(TEMPLATE) + " (committed)", str(TEMPLATE) + " (generated)"))
            print("gen-template: the template's UserData differs from scripts/user-data.sh;"
                  " run scripts/gen-template.py", file=sys.stderr)
            return 1
        print("gen-template: the template's UserData is scripts/user-data.sh")
        return 0
    if current != generated:
        TEMPLATE.write_text(generated)
        print(f"gen-template: rewrote the UserData of {TEMPLATE}")
    else:
        print("gen-template: already up to date")
    return 0


if __name__ == "__main__":
    sys.exit(main())
