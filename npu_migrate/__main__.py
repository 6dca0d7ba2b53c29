from .cli import main

if __name__ == "__main__":
    main(prog_name="npu-migrate")  # `python -m npu_migrate` says `npu-migrate` in usage lines too
