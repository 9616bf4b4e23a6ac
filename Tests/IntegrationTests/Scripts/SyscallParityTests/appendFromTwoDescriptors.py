from coordtest import *
one = os.open('log', os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
two = os.open('log', os.O_WRONLY | os.O_APPEND)
for i in range(3):
    os.write(one, b'a%d ' % i); os.write(two, b'b%d ' % i)
os.lseek(one, 0, os.SEEK_SET); os.write(one, b'end ')
print(content('log'), os.lseek(one, 0, os.SEEK_CUR), os.lseek(two, 0, os.SEEK_CUR))
os.pwrite(two, b'P ', 0); print(content('log'))
plain = os.open('log', os.O_WRONLY); os.pwrite(plain, b'XX', 0); os.close(plain)
os.truncate('log', 5); os.write(two, b'after truncate'); print(content('log'))
os.close(one); os.close(two)
